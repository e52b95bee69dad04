"""Named exit codes and the error types that carry them.

Every failure a user can cause or meet is one of these; the CLI turns it into a message on
stderr and its exit code, never a traceback.
"""

from __future__ import annotations

import errno
import os
import re
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1
    USAGE = 2
    INVALID_INPUT = 3
    PROVIDER_UNAVAILABLE = 4
    BLOCKED = 5
    HALTED = 6
    #: The run ended with a story in review: its PR waits on people (a review, checks, a merge
    #: branch protection refused), so it is not done (the pull-request loop).
    IN_REVIEW = 7
    INTERRUPTED = 130


class AiSdlcError(Exception):
    """Base of every error with a user-facing message and an exit code."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(AiSdlcError):
    """Bad arguments on the command line (e.g. an id that is not a story id)."""

    exit_code = ExitCode.USAGE


class InvalidInputError(AiSdlcError):
    """A story, config or rules file that cannot be used as it is."""

    exit_code = ExitCode.INVALID_INPUT

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if path is not None:
            where = path
            if line is not None:
                where += f":{line}"
                if column is not None:
                    where += f":{column}"
            where += ": "
        super().__init__(where + message, hint=hint)
        self.path = path
        self.line = line
        self.column = column


class StoryNotFoundError(AiSdlcError):
    exit_code = ExitCode.FAILURE


class ProviderUnavailableError(AiSdlcError):
    """The configured agent provider cannot be used here (missing key, binary or extra)."""

    exit_code = ExitCode.PROVIDER_UNAVAILABLE


class StoryBlockedError(AiSdlcError):
    """A guardrail blocked the story; a human must unblock it."""

    exit_code = ExitCode.BLOCKED

    def __init__(self, message: str, *, story_id: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.story_id = story_id


class UnsafeWorkError(AiSdlcError):
    """The story's work must not go further as it stands (commits on its branch break the
    staging or secret rules): the runner blocks the story with this message, uncounted;
    nothing was adopted or published."""


class RunHaltedError(AiSdlcError):
    """A run-level stop condition halted a multi-story run (resumable)."""

    exit_code = ExitCode.HALTED


class BusyError(AiSdlcError):
    """Another process holds the run lock for this story."""

    exit_code = ExitCode.FAILURE


class DiskFullError(AiSdlcError):
    """A write failed for want of space (ENOSPC), quota (EDQUOT) or a failing disk (EIO).

    Nothing a run writes is lost by it: every journal line is whole or absent, and an attempt
    in flight is counted (now, or by the next run when even that write could not be made)."""

    exit_code = ExitCode.FAILURE

    def __init__(self, path: str, reason: str = "No space left on device") -> None:
        fix = (
            "check that disk (the system log says more)"
            if "Input/output" in reason
            else "free some space (or quota) on that file system"
        )
        super().__init__(f"disk full: {path}", hint=f"{reason}; {fix}, then run the command again")
        self.path = path


# --- provider failures (raised by `ai_sdlc.providers`, classified by `ai_sdlc.resilience`) ---

TRANSIENT_KINDS = ("rate_limit", "overloaded", "server", "timeout", "connection")


class ProviderError(AiSdlcError):
    """Base of every provider failure. `kind` is a short machine-readable name."""

    kind: str = "provider"
    exit_code = ExitCode.FAILURE

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.status = status


class TransientProviderError(ProviderError):
    """Worth retrying: rate limit (with a hint), overload, server error, timeout, connection."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        if kind not in TRANSIENT_KINDS:
            raise ValueError(f"unknown transient kind {kind!r}")
        super().__init__(message, status=status)
        self.kind = kind
        self.retry_after = retry_after


class ProviderAuthError(ProviderError):
    """Missing or rejected credentials, or no permission. Never retried."""

    kind = "auth"
    exit_code = ExitCode.PROVIDER_UNAVAILABLE


class ProviderConfigError(ProviderError):
    """The provider is not set up (missing binary, extra, model name). Never retried."""

    kind = "config"
    exit_code = ExitCode.PROVIDER_UNAVAILABLE


class ProviderRequestError(ProviderError):
    """The request itself is wrong (invalid request, context too long). Never retried."""

    kind = "request"


class ProviderLimitError(ProviderError):
    """A spend cap or quota that will not clear by retrying. Never retried."""

    kind = "limit"


class AgentReportedError(ProviderError):
    """The agent ran and itself reported that it failed (an error result, or tool calls it was
    denied in an edit phase). Not a provider outage: the runner counts the attempt as failed,
    like any failed attempt of its phase, and the story goes on (never reads it as success)."""

    kind = "agent_failed"


#: errno values that mean the disk cannot take the write (EDQUOT is missing on Windows).
DISK_ERRNOS = frozenset(
    e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EIO) if e is not None
)
#: What git says of a full disk: the system's words, or its own when writing a file it hashes
#: (`sha1 file '<path>' write error. Out of diskspace`, e.g. the index a `status` refreshes).
_DISK_TEXT = re.compile(
    r"No space left on device|Disk quota exceeded|Input/output error|Out of diskspace"
)
_QUOTED_PATH = re.compile(r"""['"](/[^'"]+)['"]""")


def disk_full(exc: BaseException, where: str | os.PathLike[str] = ".") -> DiskFullError | None:
    """`exc` as a `DiskFullError` when it (or what it was raised from) is a failed write of a
    full disk: an OSError with one of `DISK_ERRNOS`, or a git command whose error says so (the
    path it names, else `where`). None otherwise; other errors keep their own message (our own
    errors are followed only through an explicit `raise ... from`)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DiskFullError):
            return current
        if isinstance(current, OSError) and current.errno in DISK_ERRNOS:
            path = current.filename if current.filename is not None else where
            return DiskFullError(os.fsdecode(path), current.strerror or str(current))
        if type(current).__name__ == "GitError":
            text = str(current)
            found = _DISK_TEXT.search(text)
            if found:
                named = _QUOTED_PATH.search(text)
                return DiskFullError(named.group(1) if named else os.fspath(where), found[0])
        if isinstance(current, AiSdlcError):
            # Our own error says what happened, unless it was raised *from* a full disk
            # (`raise ProviderRequestError(...) from exc` around a write).
            current = current.__cause__
            continue
        current = current.__cause__ or current.__context__
    return None
