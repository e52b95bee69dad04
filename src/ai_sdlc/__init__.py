"""ai-sdlc: take markdown stories through refine → research → plan → implement → review with AI
agents, and stop runaway recovery loops before they burn hours and API quota."""

__version__ = "0.1.0"

#: The distribution name on PyPI (pyproject.toml's `[project] name`; the command stays
#: `ai-sdlc`). Every install hint is built from it, so a rename is one edit here.
DISTRIBUTION = "ai-sdlc-runner"


def install_command(extra: str, package: str | None = None) -> str:
    """How to add an optional extra, for pip and for pipx users (`package`: the PyPI name the
    extra brings, when it differs from the extra's name)."""
    return (
        f"pip install '{DISTRIBUTION}[{extra}]' "
        f"(pipx: pipx inject {DISTRIBUTION} {package or extra})"
    )
