"""What a story's pull request says back: reviews, review threads, comments, checks (`gh api`).

One GraphQL query (`PullRequestFeedback`) reads the whole PR state per look, so following a PR
costs one API call, plus one REST call per failing check for its log tail. The answers go out
through the same `gh api` calls: a reply on a review thread and its resolution
(`addPullRequestReviewThreadReply`, `resolveReviewThread`), a PR comment, re-requested
reviewers, the squash merge (`PUT …/merge`: a merge branch protection refuses is an error, not
a success). `{owner}`/`{repo}` are filled in by gh from `GH_REPO` or the repository's remote.

Only trusted voices are feedback (`trusted`): authors with write access (association `OWNER`,
`MEMBER`, `COLLABORATOR`) and the bots the project names; everything else is listed as ignored.
A PR's text is untrusted input either way: it reaches the agent as quoted feedback only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.git.pulls import Guard, call_directly
from ai_sdlc.git.run import REMOTE_TIMEOUT, Completed, GitError, failure, run
from ai_sdlc.secrets import redact

#: Author associations that mean write access to the repository.
WRITE_ACCESS = ("OWNER", "MEMBER", "COLLABORATOR")
#: Written into every comment ai-sdlc posts, so its own words are never read back as feedback.
MARKER = "<!-- ai-sdlc -->"
#: Lines of a failing job's log quoted to the agent.
LOG_TAIL_LINES = 60
#: A conversation comment is addressed to the agent when it mentions this (case-insensitive).
MENTION = "@ai-sdlc"
#: Check conclusions that fail a PR.
FAILING = ("FAILURE", "TIMED_OUT", "CANCELLED", "ACTION_REQUIRED", "STARTUP_FAILURE", "ERROR")

QUERY = """query PullRequestFeedback($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      number state url headRefName baseRefName reviewDecision
      reviews(last: 50) { nodes { databaseId author { __typename login }
        authorAssociation state body } }
      reviewThreads(first: 100) { nodes { id isResolved path line
        comments(first: 50) { nodes { databaseId author { __typename login }
          authorAssociation body diffHunk } } } }
      comments(last: 50) { nodes { databaseId author { __typename login }
        authorAssociation body } }
      commits(last: 1) { nodes { commit { oid statusCheckRollup { state
        contexts(first: 100) { nodes { __typename
          ... on CheckRun { databaseId name status conclusion
            isRequired(pullRequestNumber: $number) }
          ... on StatusContext { context state } } } } } } }
    }
  }
}"""

REPLY = """mutation AddThreadReply($thread: ID!, $body: String!) {
  addPullRequestReviewThreadReply(input: {pullRequestReviewThreadId: $thread, body: $body}) {
    comment { id } } }"""

RESOLVE = """mutation ResolveThread($thread: ID!) {
  resolveReviewThread(input: {threadId: $thread}) { thread { id isResolved } } }"""


class Item(msgspec.Struct, frozen=True):
    """One piece of feedback: a review, an unresolved thread, a comment, a failing check."""

    kind: str  # "review", "thread", "comment", "check"
    key: str  # stable id: the same feedback is never acted on twice
    author: str
    text: str
    path: str | None = None
    line: int | None = None
    hunk: str | None = None
    thread: str | None = None

    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.path else ""


class PrState(msgspec.Struct, frozen=True):
    number: int
    state: str  # OPEN, CLOSED, MERGED
    url: str
    head_sha: str
    decision: str | None
    #: the head commit's checks: "passed", "failed", "pending" or "none" (no CI)
    checks: str
    feedback: tuple[Item, ...]
    ignored: tuple[Item, ...]

    @property
    def approved_and_green(self) -> bool:
        return self.decision == "APPROVED" and self.checks in ("passed", "none")


def pr_number(url: str) -> int:
    found = re.search(r"/pull/(\d+)\b", url)
    if found is None:
        raise GitError(f"not a pull request URL: {url}")
    return int(found.group(1))


def _login(author: Any) -> tuple[str, bool]:
    """(login, is a bot) of a GraphQL actor; a bot's login gets gh's `[bot]` suffix."""
    if not isinstance(author, Mapping):
        return "ghost", False
    login = str(author.get("login") or "ghost")
    bot = author.get("__typename") == "Bot"
    return (f"{login}[bot]" if bot and not login.endswith("[bot]") else login), bot


def trusted(author: Any, association: Any, bots: Iterable[str]) -> bool:
    """Write access, or a bot the project named (`pr.trusted_bots`, with or without `[bot]`)."""
    login, bot = _login(author)
    if bot:
        names = {b.lower().removesuffix("[bot]") for b in bots}
        return login.lower().removesuffix("[bot]") in names
    return str(association) in WRITE_ACCESS


class PullFeedback:
    """`gh api` calls about one repository's pull requests, made from `cwd`."""

    def __init__(
        self,
        cwd: Path,
        *,
        executable: str = "gh",
        guard: Guard = call_directly,
        auto_merge: bool = False,
        trusted_bots: Iterable[str] = (),
    ):
        self.cwd = cwd
        self.executable = executable
        self.guard = guard
        #: Squash-merge once approved and green (`git.auto_merge`).
        self.auto_merge = auto_merge
        self.trusted_bots = tuple(trusted_bots)

    def _api(self, *args: str, check: bool = True) -> Completed:
        argv = (self.executable, "api", *args)

        def call() -> Completed:
            done = run(argv, self.cwd, check=False, remote=True, timeout=REMOTE_TIMEOUT)
            if check and not done.ok:
                raise failure(done, remote=True)
            return done

        return self.guard(call)

    def _graphql(self, query: str, **fields: str | int) -> Any:
        args = ["graphql", "-f", f"query={query}"]
        for name, value in fields.items():
            args += ["-F" if isinstance(value, int) else "-f", f"{name}={value}"]
        done = self._api(*args)
        try:
            answer = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise GitError(f"gh api graphql printed no JSON: {redact(done.stdout[:200])}") from None
        if isinstance(answer, Mapping) and answer.get("errors"):
            raise GitError(f"GitHub refused the query: {redact(json.dumps(answer['errors']))}")
        return answer.get("data") if isinstance(answer, Mapping) else None

    def read(
        self,
        number: int,
        *,
        trusted_bots: Iterable[str] | None = None,
        seen: Collection[str] = (),
    ) -> PrState:
        """The PR's state and its feedback (trusted and ignored), in one query; a failing
        check not in `seen` (feedback keys already acted on) costs one more call, its log."""
        data = self._graphql(QUERY, owner="{owner}", name="{repo}", number=number)
        pr = ((data or {}).get("repository") or {}).get("pullRequest")
        if not isinstance(pr, Mapping):
            raise GitError(f"pull request #{number} not found")
        bots = tuple(self.trusted_bots if trusted_bots is None else trusted_bots)
        feedback: list[Item] = []
        ignored: list[Item] = []

        def take(item: Item, author: Any, association: Any, body: str) -> None:
            if MARKER in body:
                return  # ai-sdlc's own words
            (feedback if trusted(author, association, bots) else ignored).append(item)

        for review in _nodes(pr.get("reviews")):
            body = str(review.get("body") or "")
            state = str(review.get("state") or "")
            if state not in ("CHANGES_REQUESTED", "COMMENTED") or (
                state == "COMMENTED" and not body.strip()
            ):
                continue
            login, _ = _login(review.get("author"))
            text = body.strip() or "Changes requested (see the review's line comments)."
            item = Item("review", f"review:{review.get('databaseId')}", login, text)
            take(item, review.get("author"), review.get("authorAssociation"), body)
        for thread in _nodes(pr.get("reviewThreads")):
            if thread.get("isResolved"):
                continue
            comments = [c for c in _nodes(thread.get("comments"))]
            if not comments or MARKER in str(comments[-1].get("body") or ""):
                continue  # answered by ai-sdlc, nothing said since
            said = [c for c in comments if MARKER not in str(c.get("body") or "")]
            # Only trusted words reach the agent: an outsider's reply in a reviewer's thread is
            # listed as ignored, and neither starts a round nor joins the thread's text.
            asked = [c for c in said if trusted(c.get("author"), c.get("authorAssociation"), bots)]
            for c in said:
                if c not in asked:
                    who, _ = _login(c.get("author"))
                    ignored.append(
                        Item(
                            "thread",
                            f"comment:{c.get('databaseId')}",
                            who,
                            str(c.get("body") or "").strip(),
                            path=str(thread.get("path") or ""),
                            line=thread.get("line")
                            if isinstance(thread.get("line"), int)
                            else None,
                        )
                    )
            if not asked:
                continue
            last = asked[-1]
            login, _ = _login(asked[0].get("author"))
            voices = {_login(c.get("author"))[0] for c in asked}
            if voices == {login}:  # one reviewer: their words; a conversation: who said what
                text = "\n".join(str(c.get("body") or "") for c in asked)
            else:
                text = "\n".join(f"{_login(c.get('author'))[0]}: {c.get('body')}" for c in asked)
            line = thread.get("line")
            item = Item(
                "thread",
                f"thread:{thread.get('id')}:{last.get('databaseId')}",
                login,
                text,
                path=str(thread.get("path") or ""),
                line=line if isinstance(line, int) else None,
                hunk=str(asked[0].get("diffHunk") or ""),
                thread=str(thread.get("id")),
            )
            feedback.append(item)
        for comment in _nodes(pr.get("comments")):
            body = str(comment.get("body") or "")
            if MENTION not in body.lower():
                continue
            login, _ = _login(comment.get("author"))
            item = Item("comment", f"comment:{comment.get('databaseId')}", login, body.strip())
            take(item, comment.get("author"), comment.get("authorAssociation"), body)
        commit = next(iter(_nodes(pr.get("commits"))), {}).get("commit") or {}
        rollup = commit.get("statusCheckRollup") or {}
        checks = "none"
        contexts = _nodes(rollup.get("contexts"))
        if contexts:
            states = [str(c.get("conclusion") or c.get("state") or "PENDING") for c in contexts]
            checks = "pending"
            if any(s in FAILING for s in states):
                checks = "failed"
            elif all(s in ("SUCCESS", "NEUTRAL", "SKIPPED") for s in states):
                checks = "passed"
        for check in contexts:
            if str(check.get("conclusion") or check.get("state")) not in FAILING:
                continue
            name = str(check.get("name") or check.get("context") or "check")
            job = check.get("databaseId")
            key = f"check:{job or name}:{commit.get('oid')}"
            text = f"check {name} failed"
            if isinstance(job, int) and key not in seen:
                text += ":\n" + self.log_tail(job)
            feedback.append(Item("check", key, name, text))
        return PrState(
            number=int(pr.get("number") or number),
            state=str(pr.get("state") or "OPEN"),
            url=str(pr.get("url") or ""),
            head_sha=str(commit.get("oid") or ""),
            decision=str(pr["reviewDecision"]) if pr.get("reviewDecision") else None,
            checks=checks,
            feedback=tuple(feedback),
            ignored=tuple(ignored),
        )

    def log_tail(self, job: int) -> str:
        """The last lines of a check's job log, or a note when it cannot be read."""
        done = self._api(f"repos/{{owner}}/{{repo}}/actions/jobs/{job}/logs", check=False)
        if not done.ok:
            return "(the job's log could not be read)"
        lines = done.stdout.rstrip().splitlines()[-LOG_TAIL_LINES:]
        return redact("\n".join(lines))

    def reply(self, thread: str, body: str) -> None:
        self._graphql(REPLY, thread=thread, body=f"{body}\n\n{MARKER}")

    def resolve(self, thread: str) -> None:
        self._graphql(RESOLVE, thread=thread)

    def comment(self, number: int, body: str) -> None:
        path = f"repos/{{owner}}/{{repo}}/issues/{number}/comments"
        self._api(path, "-f", f"body={body}\n\n{MARKER}")

    def request_review(self, number: int, reviewers: Iterable[str]) -> None:
        people = sorted({r for r in reviewers if not r.endswith("[bot]")})
        if not people:
            return
        path = f"repos/{{owner}}/{{repo}}/pulls/{number}/requested_reviewers"
        self._api(path, *(a for r in people for a in ("-f", f"reviewers[]={r}")))

    def merge(self, number: int) -> str | None:
        """Squash-merge; None when merged, else GitHub's reason (branch protection refused)."""
        path = f"repos/{{owner}}/{{repo}}/pulls/{number}/merge"
        done = self._api("-X", "PUT", path, "-f", "merge_method=squash", check=False)
        if done.ok:
            return None
        try:
            message = str(json.loads(done.stdout).get("message") or "")
        except (json.JSONDecodeError, AttributeError):
            message = ""
        if not message:
            raise failure(done, remote=True)
        return redact(message)


_DECLINED = re.compile(r"^\s*DECLINED\s+#?(\d+)\s*[:\-]\s*(.+?)\s*$", re.MULTILINE)

#: What a PR rework round's prompt asks of an item the agent will not change.
DECLINE_RULE = (
    "If you decide not to change what an item asks, end your answer with a line "
    "'DECLINED <n>: <why>' for it (n: the item's number): its thread gets your reason as a "
    "reply and stays open for the reviewer."
)


def declined_items(answer: str) -> dict[str, str]:
    """{item number: reason} of the `DECLINED <n>: <why>` lines of a rework's answer."""
    return {m.group(1): redact(m.group(2))[:500] for m in _DECLINED.finditer(answer or "")}


def rounds_of(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each PR rework round of a story's event log (`pr_round`, then its `pr_answered`): the
    round, its items (who asked, what, where; a check that failed), the commit that answered,
    the threads resolved and declined. For `show` and the report."""
    rounds: list[dict[str, Any]] = []
    for event in events:
        action = event.get("action")
        if action == "pr_round":
            rounds.append(
                {
                    "round": event.get("round"),
                    "time": event.get("time"),
                    "items": list(event.get("items") or []),
                    "commit": None,
                    "resolved": [],
                    "declined": [],
                }
            )
        elif action == "pr_answered" and rounds:
            rounds[-1].update(
                commit=event.get("commit"),
                resolved=list(event.get("threads") or []),
                declined=list(event.get("declined") or []),
            )
    return rounds


def round_lines(rounds: Iterable[Mapping[str, Any]]) -> list[str]:
    """Rounds as text: `round 1 (answered by abc123): alice at a.py:3: "…"; check x failed`."""
    lines = []
    for r in rounds:
        commit = str(r.get("commit") or "")[:12] or "not pushed yet"
        asked = []
        for item in r.get("items") or []:
            if item.get("kind") == "check":
                asked.append(f"check {item.get('author')} failed")
                continue
            where = f" at {item['where']}" if item.get("where") else ""
            said = " ".join(str(item.get("text") or "").split())[:60]
            asked.append(f"{item.get('author')}{where}: {said!r}")
        lines.append(f"round {r.get('round')} (answered by {commit}): " + "; ".join(asked))
    return lines


def _nodes(connection: Any) -> list[Mapping[str, Any]]:
    nodes = connection.get("nodes") if isinstance(connection, Mapping) else None
    return [n for n in nodes or [] if isinstance(n, Mapping)]


def prompt_section(items: Iterable[Item]) -> str:
    """The feedback as the agent reads it: numbered, each with who, where, the hunk, the text."""
    parts = []
    for n, item in enumerate(items, 1):
        head = f"{n}. [{item.kind}] from {item.author}"
        if item.where():
            head += f" at {item.where()}"
        body = item.text
        if item.hunk:
            body = f"diff hunk:\n{item.hunk}\n{body}"
        parts.append(f"{head}\n{body}")
    return "\n\n".join(parts)


__all__ = [
    "MARKER",
    "WRITE_ACCESS",
    "Item",
    "PrState",
    "PullFeedback",
    "declined_items",
    "pr_number",
    "prompt_section",
    "round_lines",
    "rounds_of",
    "trusted",
]
