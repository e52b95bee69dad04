"""The environments untrusted children get: an allow-list for commands, the key for agents.

Verification and `worktree.setup` commands run code an agent wrote. They used to get ai-sdlc's
whole environment minus four AI keys, so a test could read `GH_TOKEN`,
`AWS_SECRET_ACCESS_KEY` or any other secret the user had exported. They now get an allow-list:
what locates programs and the user (`PATH`, `HOME`...), locale and terminal, and what the
usual toolchains read (Python, Node, Go, Rust, Java, C compilers, certificates), never a
variable whose name or value looks like a credential, plus `verify.env` (named by the project,
so given as written) and the credentials `sandbox.pass_env` names (a config file never holds a
secret). A toolchain variable missing here is added to `verify.env`, not by widening the list.

CLI agents need the rest of the user's environment (their own settings, proxies, editors) but
only their provider's key: every credential-looking variable is dropped except the provider's
(`agent_environment`) and those `sandbox.pass_env` names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ai_sdlc.sandbox.homes import CACHE_VARS, FIXED_VARS, HOME_VARS
from ai_sdlc.secrets import SECRET_SHAPES, is_secret_name

#: The private homes' and caches' variables (`homes`): a sandboxed child gets ai-sdlc's
#: values over these anyway; kept here too so that no allow-list ever drops them.
_HOMES_NAMES = frozenset(
    {name for name, _ in (*HOME_VARS, *CACHE_VARS, *FIXED_VARS)} | {"XDG_CONFIG_DIRS"}
)
#: Variables a verify or setup command gets when they are set.
COMMAND_NAMES = _HOMES_NAMES | frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "FORCE_COLOR",
        "CI",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "JAVA_HOME",
        "MAVEN_OPTS",
        "GRADLE_USER_HOME",
        "CC",
        "CXX",
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "PKG_CONFIG_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "TMPDIR",
        "TMP",
        "TEMP",
        "LD_LIBRARY_PATH",
    }
)
#: Prefixes of toolchain variables a verify or setup command gets (locale, Python, Node, Go,
#: Rust, uv, pip, and ai-sdlc's own settings for `ai-sdlc worktrees venv`), credential-named
#: ones excepted.
COMMAND_PREFIXES = ("LC_", "PYTHON", "PYTEST_", "NODE_", "NPM_CONFIG_", "GO", "CARGO_", "RUSTUP_",
                    "RUST", "UV_", "PIP_", "AI_SDLC_")  # fmt: skip
#: Python variables that change what a verify command's interpreter runs or stops at.
DANGEROUS = frozenset({"PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONBREAKPOINT", "PYTHONHOME"})
#: The AI backends' keys: an agent whose provider is not known (a `command` template of the
#: user's own) gets these, and only these, of the credentials.
AI_KEYS: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)


#: Claude Code's credentials (the `claude` provider and preset).
CLAUDE_KEYS: tuple[str, ...] = AI_KEYS[:3]


def looks_secret(name: str, value: str) -> bool:
    """A credential by its name (`..._TOKEN`, `..._KEY`...), or by its value (a token shape, a
    URL with a password)."""
    if is_secret_name(name) or SECRET_SHAPES.search(value):
        return True
    _scheme, sep, rest = value.partition("://")
    return bool(sep) and "@" in rest.split("/", 1)[0] and ":" in rest.split("@", 1)[0]


def command_environment(
    source: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
    passed: Iterable[str] = (),
) -> dict[str, str]:
    """What a verify or setup command gets of `source`: the allow-list, the variables named
    in `passed` (`sandbox.pass_env`: credentials the user hands on), then `extra` (the
    project's `verify.env`) as written."""
    allowed = set(passed)
    kept = {
        name: value
        for name, value in source.items()
        if name in allowed
        or (
            (name in COMMAND_NAMES or name.upper().startswith(COMMAND_PREFIXES))
            and name not in DANGEROUS
            and not looks_secret(name, value)
        )
    }
    kept.update(extra or {})
    return kept


def agent_environment(source: Mapping[str, str], keys: Iterable[str]) -> dict[str, str]:
    """What a CLI agent gets of `source`: everything but credentials, except `keys` (its
    provider's, and `sandbox.pass_env`)."""
    allowed = set(keys)
    return {
        name: value
        for name, value in source.items()
        if name in allowed or not looks_secret(name, value)
    }
