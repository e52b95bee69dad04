"""Keep or undo one implementation attempt in a story worktree.

Each story branch has a checkpoint ref (`refs/ai-sdlc/checkpoints/<story id>`): the commit the
current attempt started from. A passing attempt becomes one commit on top of it (commits the
agent made itself are folded in, so the staging rules apply to all of its work); a failing one is
saved as a binary-safe patch against it and the worktree is put back to it.

The functions take the checkpoint as `base` when the caller knows it (the workspace keeps the
value it last wrote or read, so a run does not re-read the ref after every phase), and read the
ref otherwise. HEAD is always read fresh (from the same `git status` call as the changes): the
agents run git themselves and may commit.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.git import incoming, repo, staging
from ai_sdlc.git.run import GitError, git
from ai_sdlc.secrets import redact, redact_title

#: Files listed by name in a failed attempt's summary before "… and N more".
SUMMARY_FILES = 10

FALLBACK_IDENTITY = {
    "GIT_AUTHOR_NAME": "ai-sdlc",
    "GIT_AUTHOR_EMAIL": "ai-sdlc@localhost",
    "GIT_COMMITTER_NAME": "ai-sdlc",
    "GIT_COMMITTER_EMAIL": "ai-sdlc@localhost",
}


#: Options of every `git diff` here: git's own diff of the real bytes, never a program the
#: config names (`diff.external`, a `textconv` driver picked by the worktree's
#: `.gitattributes`): nothing from the worktree runs, and the patch stays `git apply`-able.
RAW_DIFF = ("--no-ext-diff", "--no-textconv", "--no-color")


def checkpoint_ref(story_id: str) -> str:
    return f"refs/ai-sdlc/checkpoints/{story_id}"


def head(top: Path) -> str:
    return git(top, "rev-parse", "HEAD").stdout.strip()


def recorded_checkpoint(top: Path, story_id: str) -> str | None:
    done = git(top, "rev-parse", "--verify", "--quiet", checkpoint_ref(story_id), check=False)
    return done.stdout.strip() if done.ok and done.stdout.strip() else None


def checkpoint(top: Path, story_id: str, base: str | None = None) -> str:
    """The commit the current attempt started from: `base` when the caller knows it, else the
    recorded ref (HEAD when no checkpoint was recorded)."""
    return base or recorded_checkpoint(top, story_id) or head(top)


def set_checkpoint(top: Path, story_id: str, commit: str) -> None:
    git(top, "update-ref", checkpoint_ref(story_id), commit)


def adopt_head(
    top: Path,
    story_id: str,
    *,
    known: tuple[str, str | None] | None = None,
    dirty: bool | None = None,
) -> str:
    """Move the checkpoint to HEAD when the worktree is clean and HEAD descends from it (commits
    a human added to the branch between runs are kept, never rolled back); the checkpoint in
    force afterwards. `known`: (HEAD, the recorded checkpoint or None) when the caller has just
    read them; `dirty`: whether the worktree has changes, when known."""
    current, recorded = (
        known if known is not None else (head(top), recorded_checkpoint(top, story_id))
    )
    if recorded == current:
        return current
    if recorded:
        if dirty if dirty is not None else staging.status(top):
            return recorded
        descends = git(top, "merge-base", "--is-ancestor", recorded, current, check=False).ok
        if not descends:
            return recorded
    set_checkpoint(top, story_id, current)
    return current


def commit_message(story: Any, attempt: int) -> str:
    fm: Mapping[str, Any] = story.frontmatter
    title = redact_title(fm.get("title", "")) or story.id
    total = int(fm.get("total_recovery_attempts") or 0)
    trailers = [
        f"AI-SDLC-Story: {story.id}",
        f"AI-SDLC-Attempt: {attempt}",
        f"AI-SDLC-Recovery-Attempts: {total}",
    ]
    breakdown = fm.get("recovery_breakdown")
    if isinstance(breakdown, Mapping) and any(breakdown.values()):
        parts = ", ".join(f"{k}={int(v)}" for k, v in breakdown.items() if v)
        trailers.append(f"AI-SDLC-Recovery-Breakdown: {parts}")
    return f"feat({story.id}): {title}\n\n" + "\n".join(trailers) + "\n"


def commit_attempt(
    top: Path,
    story: Any,
    attempt: int,
    *,
    base: str | None = None,
    identity: Callable[[Path], Mapping[str, str]],
    common_dir: Path,
) -> str | None:
    """Commit the attempt's committable changes on the story branch; the new sha, or None when
    there was nothing to commit. Raises `SecretsInWorkError` before staging anything.
    `base`: the checkpoint when known; `identity`: what gives the environment for the commit
    (`identity_env` of the configured e-mail, asked only when there is something to commit);
    `common_dir`: the repository's shared git folder, to read the new commit's sha from the
    checkpoint ref just written (`update-ref <checkpoint> HEAD` resolves HEAD itself: no
    `rev-parse HEAD` before it)."""
    base = checkpoint(top, story.id, base)
    snap = staging.snapshot(top)
    moved = snap.head != base
    if moved:
        git(top, "reset", "--mixed", "--quiet", base)  # fold the agent's own commits in
        snap = staging.snapshot(top)
    changes = snap.changes
    paths = staging.committable(changes)
    if not paths:
        return None
    staging.refuse_secrets(top, changes, paths)
    if not moved:
        # The index back to HEAD before our paths are staged: whatever the agent staged itself
        # (a swap file, notes or a deletion under `.ai-sdlc/`, which `status` is not even asked
        # about) stays out of the commit, which takes the index as it is. (`commit --only
        # <paths>` did the same from a full index it rebuilt from HEAD: 0.06 s beside 20,000
        # committed files, even in a sparse worktree; this is 0.003 s.)
        git(top, "reset", "--quiet")
    staging.stage(top, paths)
    if (
        not _index_differs(changes, paths)
        and git(
            top,
            "diff",
            *RAW_DIFF,
            "--cached",
            "--quiet",
            "--",
            *map(staging.literal, paths),
            check=False,
        ).ok
    ):
        return None
    env = dict(identity(top))
    # The index holds HEAD plus exactly our paths (reset above): commit it as it is.
    with tempfile.TemporaryDirectory(prefix="ai-sdlc-commit-") as tmp:
        message = Path(tmp) / "message"
        message.write_text(commit_message(story, attempt), encoding="utf-8")
        git(
            top,
            "-c",
            "core.hooksPath=/dev/null",
            "commit",
            "--quiet",
            "--no-verify",
            f"--file={message}",
            env=env,
        )
    # No agent runs between the commit and this: HEAD is the commit just made.
    set_checkpoint(top, story.id, "HEAD")
    made = repo.ref_sha(top, common_dir, checkpoint_ref(story.id))
    if made is None:
        raise GitError(f"{checkpoint_ref(story.id)} is missing right after it was written")
    return made


def _index_differs(changes: list[staging.Change], paths: list[str]) -> bool:
    """True when staging `paths` certainly leaves the index different from HEAD, so asking
    `git diff --cached` is needless: an untracked file, or a path with nothing staged (the index
    equals HEAD there) whose work-tree file git reports changed or deleted. A path the agent
    staged itself may end up staged back to HEAD's content: then git is asked."""
    wanted = set(paths)
    return any(
        c.path in wanted
        and not c.submodule
        and (c.untracked or (c.xy[0] == " " and c.xy[1] in "MDT"))
        for c in changes
    )


def identity_env(user_email: str) -> dict[str, str]:
    """The environment a commit needs given the configured `user.email` ("" when none): our
    name and e-mail only when the user has none (a commit would fail)."""
    if user_email:
        return {}
    return {k: v for k, v in FALLBACK_IDENTITY.items() if k not in os.environ}


class FailedDiff(msgspec.Struct, frozen=True):
    patch: str
    summary: str


def capture(top: Path, story_id: str, *, base: str | None = None) -> FailedDiff | None:
    """The worktree's changes since the checkpoint (untracked non-ignored files included) as a
    `git apply`-able binary patch; None when nothing changed. Secret-looking files are left out
    (and named in the summary) and the text is redacted: the patch is written to disk."""
    base = checkpoint(top, story_id, base)
    snap = staging.snapshot(top)
    paths = staging.committable(snap.changes)
    if not paths and snap.head == base:
        return None
    secrets = staging.secret_findings(top, [p for p in paths if (top / p).exists()])
    limit: tuple[str, ...] = ()
    if snap.head is not None and snap.head != base:
        # Commits the agent made: what they add in secrets stays out of the patch too.
        committed = [f.path for f in incoming.check(top, base, snap.head) if f.secret]
        if committed:
            limit = (":(top)", *(f":(top,exclude,literal){p}" for p in committed))
            secrets.update(dict.fromkeys(committed, "committed by the agent"))
    with tempfile.TemporaryDirectory(prefix="ai-sdlc-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(top, "read-tree", "HEAD", env=env)  # HEAD: commits the agent made count too
        spec = staging.pathspec_input(p for p in paths if p not in secrets)
        if spec:
            add = ("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul")
            git(top, *add, input=spec, env=env)
        diff = ("diff", *RAW_DIFF, "--cached")
        patch = git(top, *diff, "--binary", base, "--", *limit, env=env).stdout
        numstat = git(top, *diff, "--numstat", "-z", base, "--", *limit, env=env).stdout
    summary = summarise(numstat)
    if secrets:
        summary += "; left out as secrets: " + ", ".join(sorted(secrets))
    if not patch and not secrets:
        return None
    return FailedDiff(redact(patch), summary)


def summarise(numstat_z: str) -> str:
    """`3 files changed: a.py (+3 -1), logo.png (binary), …` from `--numstat -z` output."""
    entries: list[str] = []
    for record in numstat_z.split("\0"):
        parts = record.split("\t", 2)
        if len(parts) != 3 or not parts[2]:
            continue
        added, deleted, path = parts
        entries.append(f"{path} (binary)" if added == "-" else f"{path} (+{added} -{deleted})")
    n = len(entries)
    if not n:
        return "no files changed"
    shown = ", ".join(entries[:SUMMARY_FILES])
    more = f", … and {n - SUMMARY_FILES} more" if n > SUMMARY_FILES else ""
    return f"{n} file{'s' if n != 1 else ''} changed: {shown}{more}"


def rollback(
    top: Path, story_id: str, paths: list[str] | None = None, *, base: str | None = None
) -> None:
    """Put the worktree back to the checkpoint: tracked files reset, untracked non-ignored
    files removed (only `paths` when given). Ignored files (build output, caches) and `.ai-sdlc/`
    are left alone."""
    git(top, "reset", "--hard", "--quiet", checkpoint(top, story_id, base))
    spec: tuple[str, ...] = staging.EXCLUDE_STATE
    if paths is not None:
        if not paths:
            return
        spec = tuple(map(staging.literal, paths))
    # `-f` twice: a nested repository a child left (`gitmeta` removes them first) goes too.
    git(top, "clean", "-f", "-f", "-d", "--quiet", "--", *spec)


def violations(top: Path, story_id: str, *, base: str | None = None) -> list[str]:
    """Paths a read-only phase changed (scratch files ignored), and `HEAD` if it committed."""
    return looked_violations(top, story_id, base=base)[0]


def looked_violations(
    top: Path, story_id: str, *, base: str | None = None
) -> tuple[list[str], str | None]:
    """`violations`, and the HEAD the same `git status` saw: with no violation, the work tree
    holds nothing committable at that commit (its content key is `changes.clean_key(head)`)."""
    snap = staging.snapshot(top)
    found = staging.committable(snap.changes)
    if snap.head != checkpoint(top, story_id, base):
        found.append("HEAD (a commit was made)")
    return found, snap.head
