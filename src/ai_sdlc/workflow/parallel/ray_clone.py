"""A Ray worker's workspace: a cached clone of `git.remote` per slot (one per concurrent task
on a node, reused by later tasks), the story branch reset to the remote's, and every passing
attempt's commit pushed at once (`PushingWorkspace`): the remote is the truth between nodes."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.workflow.parallel.ray_spec import RaySpec

#: Concurrent clones kept per remote on one node.
MAX_SLOTS = 64


def _git(cwd: Path, *args: str, check: bool = True) -> Any:
    from ai_sdlc.git.run import git

    return git(cwd, *args, check=check)


@contextlib.contextmanager
def clone_slot(spec: RaySpec) -> Iterator[Path]:
    """A clone of `spec.remote_url` no other task on this node uses meanwhile (flock per slot);
    cloned once, fetched on every use."""
    from ai_sdlc.git.run import REMOTE_TIMEOUT, run
    from ai_sdlc.statehome import user_state_dir

    base = Path(spec.cache_dir or user_state_dir() / "ray").expanduser()
    key = hashlib.sha256(spec.remote_url.encode()).hexdigest()[:16]
    folder = base / key
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(MAX_SLOTS):
        lock = (folder / f"slot-{n}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        try:
            clone = folder / f"slot-{n}"
            if not (clone / ".git").exists():
                run(
                    (
                        "git",
                        "clone",
                        "--quiet",
                        "-o",
                        spec.remote_name,
                        spec.remote_url,
                        str(clone),
                    ),
                    folder,
                    remote=True,
                    timeout=REMOTE_TIMEOUT,
                )
            run(
                ("git", "fetch", "--quiet", "--prune", spec.remote_name),
                clone,
                remote=True,
                timeout=REMOTE_TIMEOUT,
            )
            yield clone
            return
        finally:
            lock.close()
    raise AiSdlcError(f"all {MAX_SLOTS} clone slots under {folder} are busy")


def reset_story_branch(
    clone: Path, remote: str, branch: str, worktree: Path, story_id: str
) -> None:
    """Start from what the remote holds: no worktree, branch or checkpoint left by an earlier
    task in this slot (the pushed branch is the truth; uncommitted work of a dead task is gone)."""
    if worktree.exists():
        _git(clone, "worktree", "remove", "--force", str(worktree), check=False)
    _git(clone, "worktree", "prune", check=False)
    _git(clone, "branch", "-D", branch, check=False)
    _git(clone, "update-ref", "-d", f"refs/ai-sdlc/checkpoints/{story_id}", check=False)
    remote_ref = f"refs/remotes/{remote}/{branch}"
    if _git(clone, "rev-parse", "--verify", "--quiet", remote_ref, check=False).ok:
        _git(clone, "branch", "--no-track", branch, remote_ref)


def drop_unsettled_commit(clone: Path, remote: str, branch: str, story_id: str, open_: Any) -> bool:
    """A task that pushed a passing attempt's commit and died before the coordinator recorded
    the attempt leaves a commit the ledger counts as a crashed attempt: drop it (lease-protected
    force push), so the branch holds exactly one commit per attempt the ledger calls passed."""
    if not isinstance(open_, dict) or open_.get("phase") not in ("implement", "rework"):
        return False
    if not _git(clone, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).ok:
        return False
    message = _git(clone, "log", "-1", "--format=%B", branch).stdout
    wanted = {f"AI-SDLC-Story: {story_id}", f"AI-SDLC-Attempt: {open_.get('attempt')}"}
    if not wanted <= {line.strip() for line in message.splitlines()}:
        return False
    tip = _git(clone, "rev-parse", branch).stdout.strip()
    _git(clone, "branch", "-f", branch, f"{branch}^")
    lease = f"--force-with-lease=refs/heads/{branch}:{tip}"
    _git(clone, "push", "--quiet", lease, remote, f"refs/heads/{branch}:refs/heads/{branch}")
    return True


class PushingWorkspace:
    """The clone's `GitWorkspace`, pushing every passing attempt's commit right away (the
    coordinator and any retry on another node see the work through the remote)."""

    def __init__(self, inner: Any, remote: str) -> None:
        self.inner = inner
        self.remote = remote

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def attempt_passed(self, story: Any, path: Path, *, attempt: int) -> Any:
        from ai_sdlc.git.run import REMOTE_TIMEOUT, run

        record = self.inner.attempt_passed(story, path, attempt=attempt)
        if record.commit:
            branch, _folder = self.inner.location(story)
            run(
                ("git", "push", "--quiet", self.remote, f"HEAD:refs/heads/{branch}"),
                path,
                remote=True,
                timeout=REMOTE_TIMEOUT,
            )
        return record


__all__ = ["MAX_SLOTS", "PushingWorkspace", "clone_slot", "drop_unsettled_commit"]
