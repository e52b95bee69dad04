"""What an attempt changed in a worktree, and which of those changes may be committed.

Only paths git reports as created, changed or deleted are considered (never `git add -A`):
ignored files are not reported at all, anything under a `.ai-sdlc/` folder is excluded by
pathspec, and scratch files (editors', agents', Python's bytecode caches) are dropped. Before
anything is staged, the files are checked for secrets by name (`.env`, keys) and by content
(the redaction's credential shapes and the values of credential-like environment variables);
one hit refuses the whole commit.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import msgspec

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.git.run import git
from ai_sdlc.secrets import redact

#: Pathspecs that keep every `.ai-sdlc/` folder (ours, at any depth) out of status and staging.
EXCLUDE_STATE = (":(exclude,glob).ai-sdlc/**", ":(exclude,glob)**/.ai-sdlc/**")

#: Files agents, editors and test runs leave behind that are never work: aider's history and
#: caches, vim swap files, emacs backups and lock files, and the bytecode caches Python writes
#: when the project's own tests run (a project without `__pycache__/` in its .gitignore would
#: otherwise get them committed with every attempt).
SCRATCH_PATTERNS = (".aider*", "*.swp", "*.swo", "*.swx", "*~", ".#*", "__pycache__", "*.py[co]")

#: File names that hold credentials by convention.
SECRET_NAME_PATTERNS = (
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
)
#: `.env` templates are meant to be committed; their content is still checked.
SECRET_NAME_EXCEPTIONS = (".env.example", ".env.sample", ".env.template", ".env.dist")

#: Bytes of a file read when looking for credential-like content.
CONTENT_SCAN_LIMIT = 4 * 1024 * 1024


class Change(msgspec.Struct, frozen=True):
    """One entry of `git status --porcelain`: its two status letters and path(s)."""

    xy: str
    path: str
    #: The source of a rename or copy.
    orig: str | None = None
    #: A submodule (its content may change without its recorded commit changing).
    submodule: bool = False

    @property
    def untracked(self) -> bool:
        return self.xy == "??"

    @property
    def deleted(self) -> bool:
        return "D" in self.xy


class SecretsInWorkError(AiSdlcError):
    """The attempt's changes include files that look like secrets: nothing was committed.

    The message names the files and why they were refused, never their content.
    """

    def __init__(self, findings: dict[str, str]) -> None:
        self.paths = sorted(findings)
        listed = ", ".join(f"{p} ({findings[p]})" for p in self.paths)
        super().__init__(
            f"refusing to commit files that look like secrets: {listed}",
            hint="remove them from the worktree (or add them to .gitignore if they must stay "
            "local), then unblock the story",
        )


class Snapshot(msgspec.Struct, frozen=True):
    """One `git status` of a work tree: its HEAD commit and its changes."""

    #: HEAD's sha, or None before the first commit.
    head: str | None
    changes: list[Change]


def snapshot(top: Path, *, include_state: bool = False) -> Snapshot:
    """HEAD and the changed, deleted and untracked (non-ignored) paths of the working tree at
    `top`, in one `git status` (porcelain v2 reports HEAD's sha too: no `rev-parse HEAD`)."""
    spec = () if include_state else EXCLUDE_STATE
    done = git(
        top,
        "status",
        "--porcelain=v2",
        "--branch",
        "--no-ahead-behind",  # only HEAD's sha is wanted: no walk to the upstream
        "-z",
        "--untracked-files=all",
        "--no-renames",
        # A submodule's own changes are not ours to commit (only its recorded commit is), and
        # asking for them runs git inside it with the config and filters found there.
        "--ignore-submodules=dirty",
        "--",
        *spec,
    )
    return parse_porcelain_v2(done.stdout)


def status(top: Path, *, include_state: bool = False) -> list[Change]:
    """Changed, deleted and untracked (non-ignored) paths of the working tree at `top`."""
    return snapshot(top, include_state=include_state).changes


def parse_porcelain_v2(text: str) -> Snapshot:
    """`git status --porcelain=v2 --branch -z`: the `# branch.oid` header and the entries, with
    the two status letters as porcelain v1 shows them (`.` → space, untracked `??`)."""
    tokens = text.split("\0")
    head: str | None = None
    out: list[Change] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        kind = token[:2]
        if kind == "# ":
            key, _, value = token[2:].partition(" ")
            if key == "branch.oid" and value != "(initial)":
                head = value
        elif kind in ("? ", "! "):
            out.append(Change(token[0] * 2, token[2:]))
        elif kind in ("1 ", "2 ", "u "):
            # 1 XY sub mH mI mW hH hI path | 2 XY sub mH mI mW hH hI Xscore path \0 orig |
            # u XY sub m1 m2 m3 mW h1 h2 h3 path
            fields = {"1 ": 8, "2 ": 9, "u ": 10}[kind]
            parts = token.split(" ", fields)
            if len(parts) <= fields:
                continue
            orig = None
            if kind == "2 ":
                orig = tokens[i] if i < len(tokens) else None
                i += 1
            xy = parts[1].replace(".", " ")
            out.append(Change(xy, parts[fields], orig, submodule=parts[2].startswith("S")))
    return Snapshot(head, out)


def is_scratch(path: str) -> bool:
    """A scratch file, or a file inside a scratch folder (`.aider.tags.cache.v3/…`)."""
    return any(
        fnmatch.fnmatchcase(part, pattern)
        for part in PurePosixPath(path).parts
        for pattern in SCRATCH_PATTERNS
    )


def agent_changes(root: Path, paths: Iterable[str]) -> list[str]:
    """`paths` (relative to `root`) minus what is never the agent's work: scratch files (swap
    files, aider's history) and, inside a git repository, files git ignores (a log the user
    redirects to, build output). Used by the providers' read-only checks."""
    kept = [p for p in paths if not is_scratch(p)]
    if not kept:
        return kept
    try:
        done = git(
            root,
            "check-ignore",
            "--stdin",
            "-z",
            input="".join(f"{p}\0" for p in kept),
            check=False,
        )
    except AiSdlcError:  # git not installed: nothing more to drop
        return kept
    if done.returncode != 0:  # 1: none ignored; 128: not a repository
        return kept
    ignored = set(done.stdout.split("\0"))
    return [p for p in kept if p not in ignored]


def secret_name(path: str) -> bool:
    name = PurePosixPath(path).name.lower()
    if name in SECRET_NAME_EXCEPTIONS:
        return False
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in SECRET_NAME_PATTERNS)


def secret_content(file: Path) -> bool:
    """True when the file holds credential-like text. Symlinks are not followed (a commit
    stores the link, not its target) and unreadable files count as clean."""
    try:
        if file.is_symlink() or not file.is_file():
            return False
        with file.open("rb") as handle:
            data = handle.read(CONTENT_SCAN_LIMIT)
    except OSError:
        return False
    text = data.decode("utf-8", errors="replace")
    return redact(text) != text


def secret_findings(top: Path, paths: Iterable[str]) -> dict[str, str]:
    """path → why it looks like a secret, for the paths that do."""
    findings: dict[str, str] = {}
    for path in paths:
        if secret_name(path):
            findings[path] = "secret file name"
        elif secret_content(top / path):
            findings[path] = "credential-like content"
    return findings


def committable(changes: Iterable[Change]) -> list[str]:
    """The paths to stage: every change except scratch files, renames as both their ends."""
    paths: list[str] = []
    for change in changes:
        for path in (change.path, change.orig):
            if path and not is_scratch(path) and path not in paths:
                paths.append(path)
    return paths


def literal(path: str) -> str:
    """`path` as a pathspec that matches exactly that path (no glob, no magic)."""
    return f":(literal){path}"


def pathspec_input(paths: Iterable[str]) -> str:
    """`paths`, each taken literally, as the standard input of `--pathspec-from-file=-
    --pathspec-file-nul` (no length limit, unlike arguments)."""
    return "".join(f"{literal(p)}\0" for p in paths)


def stage(top: Path, paths: list[str]) -> None:
    """Stage exactly `paths` (additions, changes and deletions), each taken literally."""
    if not paths:
        return
    spec = pathspec_input(paths)
    git(top, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", input=spec)


def refuse_secrets(top: Path, changes: Iterable[Change], paths: list[str]) -> None:
    """Raise `SecretsInWorkError` if any path to be committed (not a deletion) is a secret."""
    deleted = {c.path for c in changes if c.deleted}
    findings = secret_findings(top, [p for p in paths if p not in deleted])
    if findings:
        raise SecretsInWorkError(findings)
