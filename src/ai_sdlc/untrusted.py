"""Reading files that a cloned repository may have made hostile: stories, config, rules.

Two guards every reader shares:

- `read_regular` opens with O_NOFOLLOW|O_NONBLOCK and checks the opened file is a regular one,
  so a FIFO cannot hang a command, a symlink cannot lead outside the project, and a directory,
  device or unreadable file is a clear error (exit 3) instead of a crash.
- `check_yaml` bounds a YAML text BEFORE a parser sees it: its size, its nesting depth, and the
  size it would have once aliases are expanded (a 350-byte "billion laughs" file otherwise takes
  gigabytes). A cheap pre-scan (length, two character counts and two regex searches, all in C)
  clears ordinary files; only big or suspicious ones get the exact event scan, one check for
  both loaders so that they are held to the same answer: with libyaml's parser when PyYAML has
  it (ruamel's pure-Python scanner is quadratic in flow nesting: 0.6 s for 10,000 `[`, libyaml
  3 ms), and with ruamel's (the reference reader) when libyaml is missing or cannot parse it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any

from ai_sdlc.errors import InvalidInputError

#: Largest YAML text read (a story's frontmatter, config.yaml, the scripted rules file).
MAX_YAML_BYTES = 256 * 1024
#: Deepest nesting of mappings and lists.
MAX_DEPTH = 64
#: Most nodes (scalars, mappings, lists) a document may hold, aliases expanded.
MAX_NODES = 20_000
#: Most characters of scalar text a document may hold, aliases expanded.
MAX_EXPANDED_CHARS = 4 * MAX_YAML_BYTES

#: Documents longer than this are always scanned exactly (they may hold many nodes).
_SCAN_ABOVE = 16 * 1024
#: An anchor or alias can only start at a line start, after white space or a flow indicator.
_ANCHOR_OR_ALIAS = re.compile(r"(?:^|[\s\[{,:])[&*]", re.MULTILINE)
#: A line whose leading spaces, `- ` and `? ` could open this many nested levels.
_DEEP_START = re.compile(rf"[ \-?]{{{MAX_DEPTH // 2}}}")
_DEEP_LINE = re.compile(rf"[\n\r\x85\u2028\u2029][ \-?]{{{MAX_DEPTH // 2}}}")

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)
REGULAR_HINT = (
    "story files, config.yaml and rules files must be regular files inside the project (no "
    "symbolic links, pipes, devices or folders, and readable): replace or remove it"
)


def kind_of(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO (named pipe)", ...), None for a regular file."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def not_regular(path: str | Path, kind: str) -> InvalidInputError:
    return InvalidInputError(
        f"refused: it is {kind}, not a regular file", path=str(path), hint=REGULAR_HINT
    )


def read_regular(path: str | Path) -> bytes:
    """Bytes of a regular file, never following a final symlink and never blocking on a FIFO.

    FileNotFoundError passes through (callers decide what a missing file means); anything else
    that is not a readable regular file is an InvalidInputError naming the file and the reason.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _open_error(path, exc) from None
    try:
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            raise not_regular(path, kind)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise _open_error(path, exc) from None
    finally:
        os.close(fd)


def _open_error(path: str | Path, exc: OSError) -> InvalidInputError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a symlink (EMLINK on BSDs)
        try:
            target = os.readlink(path)
        except OSError:
            return not_regular(path, "a symbolic link")
        return not_regular(path, f"a symbolic link (to {target})")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return InvalidInputError(
            "cannot be read: permission denied",
            path=str(path),
            hint="give your user read access to it (chmod u+r), or remove it",
        )
    if exc.errno == errno.EISDIR:
        return not_regular(path, "a directory")
    reason = exc.strerror or type(exc).__name__
    return InvalidInputError(f"cannot be read: {reason}", path=str(path), hint=REGULAR_HINT)


# -- YAML bounds ----------------------------------------------------------------------------------


def check_yaml(text: str, path: str, *, first_line: int = 1) -> None:
    """InvalidInputError (file, line, limit) when `text` is over a limit; None when it is fine.

    `first_line` is the file line of the text's first line (2 for a story's frontmatter).
    Syntax errors are left to the real loader, which words them precisely.
    """
    _check_size(text, path, first_line)
    if not _may_reach_a_limit(text):
        return
    _scan_events(text, path, first_line)


def _may_reach_a_limit(text: str) -> bool:
    """False when `text` is short, has no anchor or alias and is too flat for the depth limit
    (nesting needs a `[`/`{` or a leading space, `- ` or `? ` per level)."""
    return (
        len(text) > _SCAN_ABOVE
        or (("&" in text or "*" in text) and _ANCHOR_OR_ALIAS.search(text) is not None)
        or text.count("[") + text.count("{") >= MAX_DEPTH // 2
        or _DEEP_START.match(text) is not None
        or _DEEP_LINE.search(text) is not None
    )


def _check_size(text: str, path: str, first_line: int) -> None:
    if len(text) * 4 <= MAX_YAML_BYTES:
        return  # cannot be over the limit even if every character took 4 bytes
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_YAML_BYTES:
        return
    line = data.count(b"\n", 0, MAX_YAML_BYTES) + first_line
    raise InvalidInputError(
        f"the YAML is {len(data):,} bytes, over the limit of {MAX_YAML_BYTES:,} bytes "
        f"({MAX_YAML_BYTES // 1024} KiB); the limit is crossed on this line",
        path=path,
        line=line,
        hint="keep long text in the story body (after the closing ---) or in a separate file",
    )


def _scan_events(text: str, path: str, first_line: int) -> None:
    """Walk a parser's events (linear: aliases are not expanded) and enforce the limits:
    libyaml's when PyYAML has it, else (or when libyaml cannot parse the text: YAML 1.1 and 1.2
    differ) ruamel's, which decides."""
    try:
        import yaml

        libyaml_events: Any = yaml.parse(text, Loader=yaml.CSafeLoader)
    except (ImportError, AttributeError):  # no PyYAML, or one built without libyaml
        libyaml_events = None
    if libyaml_events is not None:
        try:
            _walk_events(libyaml_events, yaml.events, path, first_line)
            return
        except InvalidInputError:
            raise
        except Exception as exc:  # libyaml cannot parse it: ruamel decides below, unless...
            if "maximum nesting depth" in str(exc):  # ...libyaml's own limit, far above ours
                raise _too_deep(exc, path, first_line) from None
    from ruamel.yaml import YAML, events

    try:
        _walk_events(YAML(typ="rt").parse(text), events, path, first_line)
    except InvalidInputError:
        raise
    except Exception:
        return  # a syntax error: the loader reports it with its own wording


_DEEP_MESSAGE = f"nested more than {MAX_DEPTH} levels deep (the limit)"
_DEEP_HINT = "flatten the structure; a story or config needs a few levels at most"


def _too_deep(exc: Exception, path: str, first_line: int) -> InvalidInputError:
    """The depth error for a text libyaml refused as nested beyond its own limit (1,000
    levels), placed where libyaml stopped: ruamel would take 0.2–0.5 s of CPU to find where
    ours (64) is crossed, on every command that reads the file."""
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + first_line if mark is not None else first_line
    column = mark.column + 1 if mark is not None else None
    return InvalidInputError(_DEEP_MESSAGE, path=path, line=line, column=column, hint=_DEEP_HINT)


def _walk_events(stream: Any, kinds: Any, path: str, first_line: int) -> None:
    """Enforce the limits on the events of `stream`, whose classes are those of the module
    `kinds` (PyYAML's and ruamel's have the same names); a parse error propagates."""
    alias_event, scalar_event = kinds.AliasEvent, kinds.ScalarEvent
    start_event, end_event = kinds.CollectionStartEvent, kinds.CollectionEndEvent

    def fail(event: Any, message: str, hint: str) -> InvalidInputError:
        mark = getattr(event, "start_mark", None)
        line = mark.line + first_line if mark is not None else first_line
        column = mark.column + 1 if mark is not None else None
        return InvalidInputError(message, path=path, line=line, column=column, hint=hint)

    alias_hint = "write the values out instead of using `&anchor` / `*alias`"
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, characters) once closed
    stack: list[list[Any]] = [[0, 0, None]]  # open collections: [nodes, characters, anchor]
    nodes = chars = 0
    for event in stream:
        if isinstance(event, alias_event):
            anchor = event.anchor
            if anchor not in sizes:
                if any(item[2] == anchor for item in stack):
                    raise fail(
                        event,
                        f"the alias *{anchor} is used inside its own anchor &{anchor} "
                        "(the value contains itself)",
                        alias_hint,
                    )
                return  # an undefined alias: the loader reports it
            add_nodes, add_chars = sizes[anchor]
        elif isinstance(event, scalar_event):
            add_nodes, add_chars = 1, len(event.value)
            if event.anchor is not None:
                sizes[event.anchor] = (add_nodes, add_chars)
        elif isinstance(event, start_event):
            stack.append([1, 0, event.anchor])
            nodes += 1
            if len(stack) - 1 > MAX_DEPTH:
                raise fail(event, _DEEP_MESSAGE, _DEEP_HINT)
            continue
        elif isinstance(event, end_event):
            add_nodes, add_chars, anchor = stack.pop()
            if anchor is not None:
                sizes[anchor] = (add_nodes, add_chars)
            stack[-1][0] += add_nodes
            stack[-1][1] += add_chars
            continue
        else:
            continue
        stack[-1][0] += add_nodes
        stack[-1][1] += add_chars
        nodes += add_nodes
        chars += add_chars
        if nodes > MAX_NODES or chars > MAX_EXPANDED_CHARS:
            raise fail(
                event,
                f"the document expands to more than {MAX_NODES:,} values or "
                f"{MAX_EXPANDED_CHARS:,} characters (the limit), aliases counted in full",
                alias_hint
                if isinstance(event, alias_event)
                else "split it up, or keep long text in the story body or a separate file",
            )


#: Terminal control sequences, whole: OSC (titles, OSC 52 clipboard writes, hyperlinks) and the
#: string controls DCS/SOS/PM/APC up to their terminator (or the end of the line), CSI (cursor,
#: colour, erase), any other ESC sequence, and their 8-bit C1 forms.
_SEQUENCES = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?"
)
#: What is left of control characters once the sequences are gone: C0 but tab and newline (a
#: carriage return only before a newline), DEL, C1.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
#: Any character that may start either (a carriage return included: most text has none).
_ANY_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """`text` without terminal control sequences or control characters, kept for plain text,
    newlines, tabs and printable unicode. Agent text is stored (story body, research, plan,
    review, events) and later shown by `cat`, `git log -p` or an editor: an OSC 52 or a title
    sequence a model printed must not reach the user's terminal from there."""
    if _ANY_CONTROL.search(text) is None:  # the common case: nothing to strip
        return text
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))
