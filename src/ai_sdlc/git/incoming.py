"""Commits a story branch gained that ai-sdlc did not make: checked before they go further.

An agent can run `git commit` itself; ai-sdlc folds such commits into its own during a run (the
staging rules apply), but a run killed after the agent's commit leaves it on the branch, and the
next run would adopt it and push it. So before commits are adopted on resume, and before a
branch is pushed, every file any commit in the range adds or changes passes the rules
ai-sdlc's own commits follow (`staging`): no `.ai-sdlc/` state, no scratch files, no secret by
name or by content. One finding refuses the whole range, naming the commit and the file (never
the content).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import IO

import msgspec

from ai_sdlc.errors import UnsafeWorkError
from ai_sdlc.git import staging
from ai_sdlc.git.run import LOCAL_TIMEOUT, GitError, clean_env, git, git_options
from ai_sdlc.secrets import redact

#: Findings named in the message before "… and N more".
SHOWN = 5
#: Modes whose blob is file content (symlinks and submodules are not read).
_FILE_MODES = ("100644", "100755")


#: The reasons that say a file holds a secret (the others: it is never committed).
SECRET_NAME = "secret file name"
SECRET_CONTENT = "credential-like content"


class ForeignCommit(msgspec.Struct, frozen=True):
    commit: str
    #: The file, or "" for the commit's message.
    path: str
    reason: str

    @property
    def secret(self) -> bool:
        return bool(self.path) and self.reason in (SECRET_NAME, SECRET_CONTENT)

    def __str__(self) -> str:
        what = f"adds {self.path}" if self.path else "message"
        return f"commit {self.commit[:12]} {what} ({self.reason})"


class UnsafeCommitsError(UnsafeWorkError):
    """Commits on the story branch break the staging or secret rules: nothing was adopted or
    pushed. The message names commits and files, never their content."""

    def __init__(
        self, story_id: str, branch: str, findings: list[ForeignCommit], *, worktree: Path
    ) -> None:
        self.findings = findings
        shown = findings[:SHOWN]
        listed = "; ".join(map(str, shown))
        if len(findings) > SHOWN:
            listed += f"; … and {len(findings) - SHOWN} more"
        first = findings[0].commit
        checkpoint = f"refs/ai-sdlc/checkpoints/{story_id}"
        super().__init__(
            f"branch {branch} has commits ai-sdlc did not make that break its commit rules "
            f"(nothing was pushed): {listed}",
            hint=f"save what you need, drop the commits (`git -C {worktree} reset --hard "
            f"{first[:12]}^` and `git -C {worktree} update-ref {checkpoint} HEAD`), then "
            f"`ai-sdlc unblock {story_id}`",
        )


def check(top: Path, since: str | Sequence[str], tip: str) -> list[ForeignCommit]:
    """What breaks the rules among the files the commits `tip` has and none of `since` has
    (`since..tip`) add or change, each commit against each of its parents: a secret added then
    removed is still in the history a push sends. `top`: a work tree of the repository."""
    bases = [since] if isinstance(since, str) else list(since)
    if tip in bases:
        return []
    done = git(
        top,
        "log",
        "-z",
        "--raw",
        "--no-abbrev",
        "--no-renames",
        "--no-ext-diff",
        "--no-textconv",
        "-m",
        "--topo-order",
        "--reverse",  # parents first: a file is blamed on the commit that brought it
        "--format=commit %H%n%B",
        tip,
        "--not",
        *bases,
        "--",
    )
    findings: list[ForeignCommit] = []
    blobs: dict[str, tuple[str, str]] = {}  # blob → (commit, path), the first that added it
    seen: set[tuple[str, str]] = set()  # (path, blob): a merge shows its side's files again
    commit = ""
    tokens = done.stdout.split("\0")
    i = 0
    while i < len(tokens):
        token = tokens[i].lstrip("\n")
        i += 1
        if token.startswith("commit "):
            commit, _, message = token[len("commit ") :].partition("\n")
            if redact(message) != message:  # pushed with the commit, like its files
                findings.append(ForeignCommit(commit, "", SECRET_CONTENT))
            continue
        if not token.startswith(":") or i >= len(tokens):
            continue
        path = tokens[i]
        i += 1
        fields = token[1:].split(" ")
        if len(fields) != 5 or fields[4].startswith("D"):
            continue
        mode, blob = fields[1], fields[3]
        if (path, blob) in seen:
            continue
        seen.add((path, blob))
        reason = _path_rule(path)
        if reason:
            findings.append(ForeignCommit(commit, path, reason))
        elif mode in _FILE_MODES and blob not in blobs:
            blobs[blob] = (commit, path)
    for blob in _secret_blobs(top, list(blobs)):
        commit, path = blobs[blob]
        findings.append(ForeignCommit(commit, path, SECRET_CONTENT))
    return findings


def refuse(
    top: Path,
    since: str | Sequence[str],
    tip: str,
    *,
    story_id: str,
    branch: str,
    worktree: Path,
) -> None:
    """Raise `UnsafeCommitsError` when `check` finds anything (`worktree`: the story's, for
    the hint)."""
    findings = check(top, since, tip)
    if findings:
        raise UnsafeCommitsError(story_id, branch, findings, worktree=worktree)


def _path_rule(path: str) -> str:
    """Why the staging rules would never commit `path` ("" when they would)."""
    if ".ai-sdlc" in PurePosixPath(path).parts[:-1]:
        return "ai-sdlc's own folder, never committed"
    if staging.is_scratch(path):
        return "scratch file, never committed"
    if staging.secret_name(path):
        return SECRET_NAME
    return ""


def _secret_blobs(top: Path, blobs: list[str]) -> list[str]:
    """The blobs among `blobs` whose first `CONTENT_SCAN_LIMIT` bytes hold credential-like
    text, read in one `git cat-file --batch` (streamed: a huge blob is not held whole)."""
    if not blobs:
        return []
    argv = ["git", *git_options(top), "cat-file", "--batch"]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=top,
            env=clean_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise GitError(f"git cat-file could not start: {exc}") from None
    assert proc.stdin is not None and proc.stdout is not None

    def feed() -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.write("".join(f"{b}\n" for b in blobs).encode("ascii"))
            proc.stdin.close()
        except OSError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    timer = threading.Timer(LOCAL_TIMEOUT, proc.kill)
    timer.start()
    found: list[str] = []
    try:
        for blob in blobs:
            header = proc.stdout.readline().decode("ascii", "replace").split()
            if len(header) != 3 or header[1] != "blob" or not header[2].isdigit():
                raise GitError(f"git cat-file gave no content for blob {blob}")
            size = int(header[2])
            head = _read(proc.stdout, min(size, staging.CONTENT_SCAN_LIMIT))
            _skip(proc.stdout, size - len(head) + 1)  # the rest, and the newline after it
            text = head.decode("utf-8", errors="replace")
            if redact(text) != text:
                found.append(blob)
    finally:
        timer.cancel()
        proc.stdout.close()
        proc.kill()
        proc.wait()
        writer.join()
    return found


def _read(stream: IO[bytes], size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = stream.read(min(size, 1 << 20))
        if not chunk:
            raise GitError("git cat-file stopped before the end of a blob")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _skip(stream: IO[bytes], size: int) -> None:
    while size > 0:
        chunk = stream.read(min(size, 1 << 20))
        if not chunk:
            return
        size -= len(chunk)
