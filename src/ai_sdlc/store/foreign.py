"""Markdown documents written elsewhere, read as drafts of new stories (`ai-sdlc add --from`).

A foreign document may carry YAML (`---`), TOML (`+++`) or JSON (`{ … }`) frontmatter, or none;
python-frontmatter splits and parses it (our own store never uses it: it rewrites what it reads,
see the store's splice writer). Its stock TOML handler needs the unmaintained `toml` package,
so TOML goes through the standard library's `tomllib` (TOML 1.0) behind the same handler API.
Known fields are mapped (title, or else the first `# heading`; labels or tags; priority; type
and status when they are ours; our graph fields `dependencies` and `epic`); the body is kept as
written. A document's own `id` names it in the others' dependencies (`add --from` renumbers).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.store import schema

#: Largest document read (a story is a page of text, not a data dump).
MAX_BYTES = 1_000_000

_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


@dataclass(frozen=True)
class Draft:
    """What a new story gets from one document."""

    path: Path
    title: str
    body: str
    labels: tuple[str, ...] = ()
    priority: int | None = None
    type: str = "feature"
    status: str = "backlog"
    #: Story ids this one depends on, as the document wrote them (canonical form).
    dependencies: tuple[str, ...] = ()
    epic: str | None = None
    #: The document's own story id (`id: S-0003`), which other documents' dependencies name.
    source_id: str | None = None
    #: Frontmatter keys that were not used (reported, never copied).
    ignored: tuple[str, ...] = field(default=())


def _handlers() -> list[Any]:
    from frontmatter.default_handlers import BaseHandler, JSONHandler, YAMLHandler

    class TomllibHandler(BaseHandler):
        """`+++` TOML frontmatter read with the standard library."""

        FM_BOUNDARY = re.compile(r"^\+{3,}\s*$", re.MULTILINE)
        START_DELIMITER = END_DELIMITER = "+++"

        def load(self, fm: str, **kwargs: Any) -> Any:
            return tomllib.loads(fm)

    return [YAMLHandler(), TomllibHandler(), JSONHandler()]


def _fail(path: Path, message: str, hint: str | None = None) -> InvalidInputError:
    return InvalidInputError(message, path=str(path), hint=hint)


def read_draft(path: Path) -> Draft:
    """Parse one document; InvalidInputError (naming the file) when it cannot be a story."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _fail(path, f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise _fail(path, f"is {len(data):,} bytes; a story document is at most {MAX_BYTES:,}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _fail(path, f"is not UTF-8 text (byte {exc.start})", "save it as UTF-8") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    meta, body = _split(path, text)
    return _draft(path, meta, body)


def _split(path: Path, text: str) -> tuple[dict[str, Any], str]:
    stripped = text.lstrip("\n")
    for handler in _handlers():
        if not handler.detect(stripped):
            continue
        try:
            raw, body = handler.split(stripped)
        except ValueError:
            raise _fail(
                path,
                f"the {handler.START_DELIMITER or '{'} frontmatter is never closed",
                "end it with a line holding only the same delimiter",
            ) from None
        try:
            meta = handler.load(raw)
        except (ValueError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise _fail(path, f"bad frontmatter: {_first_line(exc)}") from None
        except Exception as exc:  # yaml.YAMLError (PyYAML is the handler's parser)
            if type(exc).__module__.startswith("yaml"):
                skipped = len(text) - len(stripped)  # blank lines before the opening ---
                raise _yaml_error(path, exc, first_line=skipped + 1) from None
            raise
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise _fail(path, "the frontmatter is not a mapping of fields")
        return meta, body.lstrip("\n")
    return {}, stripped


def _yaml_error(path: Path, exc: BaseException, *, first_line: int) -> InvalidInputError:
    """PyYAML's error as file:line:column and its problem in its own words, without its
    `in "<unicode string>", line 2` (it parsed a string, not the file)."""
    mark = getattr(exc, "problem_mark", None)
    problem = _cut(str(getattr(exc, "problem", None) or exc))
    line = mark.line + first_line if mark is not None else None
    column = mark.column + 1 if mark is not None else None
    return InvalidInputError(
        f"bad YAML frontmatter: {problem}",
        path=str(path),
        line=line,
        column=column,
        hint='quote a value that holds ": ", e.g. title: "Fix: the login"'
        if "mapping values" in str(problem)
        else "fix the YAML between the --- lines (a value may be quoted)",
    )


def _first_line(exc: BaseException) -> str:
    return _cut(str(exc))


def _cut(message: str) -> str:
    """One line of up to 200 characters (a tag or key can be any length)."""
    text = " ".join(message.split())
    return text if len(text) <= 200 else text[:197] + "..."


def _draft(path: Path, meta: Mapping[str, Any], body: str) -> Draft:
    title = meta.get("title")
    if title is None:
        heading = _HEADING.search(body)
        title = heading.group(1) if heading else None
    if not isinstance(title, str) or not " ".join(title.split()):
        raise _fail(
            path,
            "has no title",
            "give it a `title:` field or a first line like `# Export the board as CSV`",
        )
    clean_title = " ".join(title.split())
    if not clean_title.isprintable():
        raise _fail(path, "the title must be printable text")
    labels = _labels(path, meta.get("labels", meta.get("tags")))
    priority = meta.get("priority")
    if priority is not None and not (
        isinstance(priority, int)
        and not isinstance(priority, bool)
        and 0 <= priority <= schema.MAX_COUNTER
    ):
        raise _fail(
            path,
            f"priority must be a whole number from 0 to {schema.MAX_COUNTER:,}, not {priority!r}",
        )
    kind = meta.get("type")
    status = meta.get("status")
    used = {"title", "labels", "tags", "priority", "type", "status", "dependencies", "epic"}
    dependencies, epic = _graph_fields(path, meta)
    source_id = meta.get("id")
    if not (isinstance(source_id, str) and schema.ID_PATTERN.fullmatch(source_id)):
        source_id = None
    else:
        used.add("id")  # it maps the other documents' dependencies onto the new ids
    text = body if body.strip() else f"# {clean_title}\n"
    if not text.endswith("\n"):
        text += "\n"
    return Draft(
        path=path,
        title=clean_title,
        body=text,
        labels=labels,
        priority=priority,
        type=kind if isinstance(kind, str) and schema.type_problem(kind) is None else "feature",
        status=status if status in schema.STATUSES and status != "blocked" else "backlog",
        dependencies=dependencies,
        epic=epic,
        source_id=source_id,
        ignored=tuple(sorted(str(k) for k in meta if k not in used)),
    )


def _graph_fields(path: Path, meta: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """`dependencies` and `epic`, checked as our own story files check them."""
    deps: tuple[str, ...] = ()
    if "dependencies" in meta and meta["dependencies"] is not None:
        problem = schema.field_problem("dependencies", meta["dependencies"])
        if problem is not None:
            raise _fail(path, problem.message, problem.hint)
        deps = tuple(dict.fromkeys(meta["dependencies"]))
    epic = meta.get("epic")
    if epic is not None:
        problem = schema.field_problem("epic", epic)
        if problem is not None:
            raise _fail(path, problem.message, problem.hint)
    return deps, epic


def _labels(path: Path, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str | int) for i in items):
        raise _fail(path, "labels/tags must be a list of words (or one comma-separated line)")
    labels = [" ".join(str(i).split()) for i in items]
    if not all(label.isprintable() for label in labels):
        raise _fail(path, "labels must be printable one-line words")
    return tuple(dict.fromkeys(label for label in labels if label))


def documents(source: Path) -> list[Path]:
    """The documents `--from` names: the file itself, or every `*.md` of a folder (sorted,
    not recursive); InvalidInputError when there is none."""
    if source.is_dir():
        found = sorted(p for p in source.glob("*.md") if p.is_file())
        if not found:
            raise _fail(source, "holds no *.md file", "point --from at a markdown file or folder")
        return found
    if not source.exists():
        raise _fail(source, "does not exist")
    return [source]
