"""What a Ray worker needs to run a story (`RaySpec`), and how the coordinator builds it from a
project (`ray_spec_for`), refusing a project the workers could not work on (no Ray, no remote,
`--no-worktree`) before a run is created. Everything in the spec crosses the network."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.errors import ProviderUnavailableError, UsageError
from ai_sdlc.workflow.parallel.worker import OpenSession

#: Environment variables a worker adopts from the coordinator (config overrides, git identity).
#: API keys are not shipped: each worker node has its own.
SHIPPED_ENV_PREFIXES = ("AI_SDLC_", "GIT_AUTHOR_", "GIT_COMMITTER_", "GIT_CONFIG_")


@dataclass(frozen=True)
class RaySpec:
    """What a cluster worker needs; everything here crosses the network (no local paths of the
    coordinator are used on the worker)."""

    remote_url: str
    remote_name: str
    #: The project folder inside the repository ("" when it is the top).
    prefix: str
    provider: str | None
    #: The coordinator's effective configuration (all layers merged), as JSON.
    config_json: str
    #: The scripted provider's rules file, when the project has one.
    scripted_rules: bytes | None
    #: Opens the worker's own session (a module-level function of the composition root,
    #: shipped by reference: this package never imports the session).
    open_session: OpenSession
    environ: dict[str, str] = field(default_factory=dict)
    #: Where workers keep their clones (default: the user state folder's `ray`, which sandboxed
    #: agents cannot write; `~/.cache`, which they can, would let one edit a clone's git config).
    cache_dir: str | None = None
    #: `run --no-sandbox`: the workers' children run unconfined too.
    no_sandbox: bool = False


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def require_ray() -> None:
    """Exit 4 with the install command when the `ray` extra is missing."""
    if not ray_available():
        from ai_sdlc import install_command

        raise ProviderUnavailableError(
            "--executor ray needs the Ray package, which is not installed",
            hint="install it: " + install_command("ray"),
        )


def config_json(data: dict[str, Any]) -> str:
    """The effective config as a project layer for workers (YAML is a superset of JSON); the
    worktrees live inside the worker's clone whatever the coordinator's setting."""
    copy = json.loads(json.dumps(data, default=str))
    copy.setdefault("git", {})["worktrees_dir"] = ".ai-sdlc/worktrees"
    return json.dumps(copy, indent=1)


def ray_spec_for(session: Any, open_session: OpenSession) -> RaySpec:
    """What the workers need, from the project (remote, effective config, scripted rules) and
    the composition root (`open_session`); refuses a project the workers could not work on
    (checked before a run is created)."""
    from ai_sdlc.git import repo
    from ai_sdlc.providers.scripted import RULES_FILE

    require_ray()
    config = session.config
    root = Path(session.store.root).resolve()
    if session.no_worktree:
        raise UsageError(
            "--executor ray works through git worktrees: --no-worktree cannot be used with it"
        )
    top = repo.toplevel(root)
    remote = config.typed().git.remote
    url = repo.remote_url(top, remote) if top is not None else None
    if top is None or not url:
        raise UsageError(
            f"--executor ray needs a git remote {remote!r} the workers can clone and push to",
            hint=f"add it (git remote add {remote} URL) or set git.remote",
        )
    rules = root / RULES_FILE
    return RaySpec(
        remote_url=url,
        remote_name=remote,
        prefix=root.relative_to(top).as_posix() if root != top else "",
        provider=session.provider_name,
        config_json=config_json(config.data),
        scripted_rules=rules.read_bytes() if rules.is_file() else None,
        open_session=open_session,
        environ={k: v for k, v in os.environ.items() if k.startswith(SHIPPED_ENV_PREFIXES)},
        cache_dir=config.typed().run.ray.cache_dir,
        no_sandbox=session.no_sandbox,
    )


__all__ = ["RaySpec", "config_json", "ray_available", "ray_spec_for", "require_ray"]
