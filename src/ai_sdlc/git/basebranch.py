"""`BaseBranch`: the branch a repository's stories start from and their pull requests target.

`git.base_branch` when set, else the repository's default branch, resolved once per workspace:
a story's pull request targets the branch it was started from even if `origin/HEAD` or the
checkout's branch changes meanwhile. Answered from a `RefSnapshot` the caller already read
where it can, so resolving costs no extra git call.
"""

from __future__ import annotations

from pathlib import Path

from ai_sdlc.git import repo, worktrees
from ai_sdlc.git.repo import RefSnapshot
from ai_sdlc.git.run import GitError
from ai_sdlc.git.settings import GitSettings


class BaseBranch:
    """The base branch of the repository whose main checkout is `top`."""

    def __init__(self, top: Path, common_dir: Path, settings: GitSettings) -> None:
        self.top = top
        self._common_dir = common_dir
        self.settings = settings
        #: The default branch once resolved (unused while `git.base_branch` is set).
        self._resolved: str | None = None

    def name(
        self, refs: RefSnapshot | None = None, trees: list[worktrees.Worktree] | None = None
    ) -> str:
        """`git.base_branch`, else the repository's default branch (resolved once; `refs` and
        `trees` are what the caller already read, to answer without asking git again)."""
        if self.settings.base_branch:
            return self.settings.base_branch
        if self._resolved is None:
            self._resolved = self._default_branch(refs, trees)
        return self._resolved

    def _default_branch(
        self, refs: RefSnapshot | None, trees: list[worktrees.Worktree] | None
    ) -> str:
        """`repo.default_branch`, answered from `refs` (`origin/HEAD`) and `trees` (the
        checkout's branch) when they can; git is asked as before when they cannot."""
        remote = self.settings.remote
        name = f"refs/remotes/{remote}/HEAD"
        prefix = f"refs/remotes/{remote}/"
        if refs is not None:
            found = refs.get(name)
            if found is not None and found.symref.startswith(prefix):
                return found.symref[len(prefix) :]
            # No remote HEAD at all (not even one pointing at a deleted branch, which
            # `for-each-ref` does not list): the branch checked out in the main checkout.
            if found is None and trees and not repo.maybe_symref(self._common_dir, name):
                here = worktrees.find_in(trees, self.top)
                if here is not None and here.branch:
                    return here.branch
        return repo.default_branch(self.top, remote)

    def ref_names(self, trees: list[worktrees.Worktree] | None = None) -> list[str]:
        """The refs that tell the base branch and where a story branch starts from, as far as
        they can be named before asking git (to ask for them in the same call)."""
        remote = self.settings.remote
        base = self.settings.base_branch or self._resolved
        names: list[str] = []
        if not base:
            names.append(f"refs/remotes/{remote}/HEAD")
            here = worktrees.find_in(trees, self.top) if trees else None
            base = here.branch if here is not None else None
        if base:
            names += [f"refs/heads/{base}", f"refs/remotes/{remote}/{base}"]
        return names

    def start_point(self, base: str, refs: RefSnapshot) -> tuple[str, repo.Ref]:
        """`repo.start_point` from the snapshot: the local base branch, else its
        remote-tracking branch; with the commit it names."""
        remote = self.settings.remote
        refs.ask(f"refs/heads/{base}", f"refs/remotes/{remote}/{base}")
        local = refs.get(f"refs/heads/{base}")
        if local is not None:
            return base, local
        tracking = refs.get(f"refs/remotes/{remote}/{base}")
        if tracking is not None:
            return f"{remote}/{base}", tracking
        raise GitError(
            f"base branch {base!r} does not exist (neither locally nor as {remote}/{base})",
            hint="set an existing branch: ai-sdlc config git.base_branch <branch>",
        )

    def commits(self, base: str, refs: RefSnapshot) -> list[str]:
        """The commits of the base branch, local and remote-tracking (what the story branch
        has beyond both is the story's own); `GitError` when neither exists."""
        remote = self.settings.remote
        names = (f"refs/heads/{base}", f"refs/remotes/{remote}/{base}")
        refs.ask(*names)
        found = [ref.sha for ref in map(refs.get, names) if ref is not None]
        if not found:
            self.start_point(base, refs)  # raises its "does not exist" error
        return found
