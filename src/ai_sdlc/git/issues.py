"""GitHub issues through the GitHub CLI (`gh issue list --json …`), for `ai-sdlc import github`.

The call runs under the caller's guard (the `github` resilience policy), so a network failure,
an HTTP 5xx or a rate limit is retried there. An imported story records its issue in the
TypeScript tool's fields (`ticket_provider: github`, `ticket_id: "<number>"`, `ticket_url`,
`ticket_synced_at`); `ticket_url` is what makes a second import skip the issue.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ai_sdlc.git.pulls import Guard, call_directly
from ai_sdlc.git.run import REMOTE_TIMEOUT, Completed, GitError, run
from ai_sdlc.secrets import redact

FIELDS = "number,title,body,labels,url,state"
STATES = ("open", "closed", "all")

#: The story type an issue label means (after `_label_word`), most telling first: an issue
#: labelled both `bug` and `enhancement` is a bug. Unlisted labels say nothing (feature).
_TYPE_WORDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("bug", frozenset({"bug", "defect", "regression", "crash", "bugfix"})),
    ("spike", frozenset({"spike", "research", "investigation", "investigate", "question"})),
    (
        "chore",
        frozenset(
            {
                "chore",
                "maintenance",
                "refactor",
                "refactoring",
                "dependencies",
                "deps",
                "ci",
                "build",
                "tech debt",
                "tech-debt",
                "docs",
                "documentation",
                "cleanup",
            }
        ),
    ),
    ("feature", frozenset({"feature", "enhancement", "feature request", "improvement"})),
)


def _label_word(label: str) -> str:
    """`Type: Bug`, `kind/bug`, `type/bug`, `T-bug` → `bug`."""
    word = label.strip().lower()
    for sep in (":", "/"):
        head, found, tail = word.partition(sep)
        if found and head.strip() in ("type", "kind", "t", "category"):
            word = tail
    return " ".join(word.removeprefix("t-").split())


def story_type(labels: Iterable[str]) -> str:
    """The story type GitHub labels suggest (`bug` → bug, `enhancement` → feature, …)."""
    words = {_label_word(label) for label in labels}
    for kind, names in _TYPE_WORDS:
        if words & names:
            return kind
    return "feature"


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str
    labels: tuple[str, ...]
    url: str
    state: str

    def ticket_fields(self, now: dt.datetime) -> dict[str, Any]:
        """The frontmatter the TypeScript tool writes for a linked GitHub issue."""
        return {
            "ticket_provider": "github",
            "ticket_id": str(self.number),
            "ticket_url": self.url,
            "ticket_synced_at": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    @property
    def story_type(self) -> str:
        return story_type(self.labels)

    def story_body(self) -> str:
        text = self.body.replace("\r\n", "\n").strip()
        parts = [f"# {' '.join(self.title.split())}", f"Imported from {self.url}"]
        if text:
            parts.append(text)
        return "\n\n".join(parts) + "\n"


def list_issues(
    cwd: Path,
    *,
    state: str = "open",
    labels: Iterable[str] = (),
    limit: int = 100,
    executable: str = "gh",
    guard: Guard = call_directly,
    runner: Callable[..., Completed] = run,
) -> list[Issue]:
    """The repository's issues as `gh` lists them (newest first)."""
    args = [executable, "issue", "list", "--json", FIELDS, "--state", state, "--limit", str(limit)]
    for label in labels:
        args += ["--label", label]
    done = guard(lambda: runner(tuple(args), cwd, remote=True, timeout=REMOTE_TIMEOUT))
    try:
        items = json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        shown = redact(done.stdout[:200])
        raise GitError(f"gh issue list printed something that is not JSON: {shown}") from None
    if not isinstance(items, list):
        raise GitError("gh issue list printed JSON that is not a list of issues")
    return [parse_issue(item) for item in items]


def parse_issue(item: object) -> Issue:
    """One element of `gh issue list --json number,title,body,labels,url,state`."""
    if not isinstance(item, Mapping):
        raise GitError(f"gh issue list printed an issue that is not an object: {item!r:.100}")
    number, title, url = item.get("number"), item.get("title"), item.get("url")
    if not (isinstance(number, int) and isinstance(title, str) and isinstance(url, str)):
        raise GitError(
            f"gh issue list printed an issue without number, title or url: {item!r:.200}"
        )
    labels = []
    for label in item.get("labels") or []:
        name = label.get("name") if isinstance(label, Mapping) else label
        if isinstance(name, str) and name.strip():
            labels.append(" ".join(name.split()))
    body = item.get("body")
    return Issue(
        number=number,
        title=title,
        body=body if isinstance(body, str) else "",
        labels=tuple(dict.fromkeys(labels)),
        url=url,
        state=str(item.get("state") or "").lower(),
    )
