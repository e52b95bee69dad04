"""What `doctor` says about story worktrees' environments: would verification in a new story
worktree (and in each existing one) judge the worktree's code, and if not, the fix."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ai_sdlc.git import repo
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.verify.commands import verify_environment
from ai_sdlc.worktree_env import wrongtree
from ai_sdlc.worktree_env.setup import SetupSettings, stamp_path, suggestion_text

if TYPE_CHECKING:
    from ai_sdlc.config import Config

#: The folder name a not-yet-made story worktree is judged at (nothing is created).
_PROBE = "S-0000-doctor"


def diagnose(root: Path, config: Config) -> dict[str, Any]:
    """`{"ok": bool, "message": str, "fix": str | None, "setup": [...]}` for `doctor`."""
    settings = SetupSettings.from_config(config)
    setup = list(settings.commands)
    commands = config.typed().verify.commands()
    git = GitSettings.from_config(config)
    found = repo.locate(root) if git.worktrees else None
    if found is None or not commands:
        why = "no story worktrees here" if found is None else "no verify command configured"
        return {"ok": True, "message": f"nothing to check ({why})", "fix": None, "setup": setup}
    worktrees_root = git.worktrees_root(root).resolve()
    main = found.top
    checked = [worktrees_root / _PROBE] if not setup else []
    # Existing worktrees: all of them without a setup; with one, those it already ran in (the
    # next run sets up the others before any attempt).
    checked += [w for w in _existing(main, root, found.top) if not setup or _set_up(w)]
    typed = config.typed()
    environ = verify_environment(typed.verify.env, typed.sandbox.pass_env)
    for worktree in checked:
        findings = wrongtree.check(
            commands,
            worktree=worktree,
            main=main,
            project=root,
            worktrees_root=worktrees_root,
            environ=environ,
        )
        if findings:
            shown = "a new story worktree" if worktree.name == _PROBE else str(worktree)
            return {
                "ok": False,
                "message": findings[0].message(shown),
                "fix": f"set worktree.setup, e.g. {suggestion_text(root)}",
                "setup": setup,
            }
    if setup:
        message = f"worktree.setup gives each story worktree its own environment: {setup}"
    else:
        message = "no verify command imports the project's code from the main checkout"
    return {"ok": True, "message": message, "fix": None, "setup": setup}


def _set_up(work: Path) -> bool:
    stamp = stamp_path(work)
    return stamp is not None and stamp.is_file()


def _existing(main: Path, root: Path, top: Path) -> list[Path]:
    """The project folder inside each existing story worktree."""
    from ai_sdlc.git import worktrees

    prefix = root.resolve().relative_to(top.resolve())
    return [
        tree.path / prefix
        for tree in worktrees.listing(main)
        if tree.story_id is not None and not tree.prunable and tree.path.is_dir()
    ]
