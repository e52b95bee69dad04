"""The ledger's anchors: copies of each story's newest ledger entry kept outside the project's
git-ignored state, so that losing or rewriting the ledger is noticed instead of starting over.

The ledger (`.ai-sdlc/state/ledger/<id>.jsonl`) sits next to the worktree, git-ignored: an agent
or a verify command can truncate it, delete it, append a forged entry, or replace it by a link
or a folder; a user's `git clean -xfd` wipes it. So every entry is also written, *before* it is
appended to the ledger, to two places one wipe cannot reach together:

- the user's state folder (`statehome.ProjectState`: `~/.local/state/ai-sdlc/<project>/ledger/
  <id>.jsonl`, a journal of every entry), outside the project: no project-level clean,
  checkout or `rm -rf` reaches it;
- a git ref `refs/ai-sdlc/ledger/<id>` in the main repository's git folder (when there is one),
  which `git clean` never touches and which is never pushed: a blob of the counters (chain,
  total, breakdown), moved only when they change, so a run that counts nothing starts no git
  process for it and a counted recovery one.

Each transaction compares the ledger's last entry with them (the whole entry with the state
folder's last line, the counters with the ref). Equal: nothing to do. A copy one entry ahead
whose `prev` is the ledger's last line: a crash between writing the copies and the ledger
(taken as the truth). Anything else (no ledger, fewer entries, more entries, another entry at the
same seq, a broken chain, a replaced file) is tamper: the counters become the highest of every
record that survives (the ledger, each copy, the story's events since its last reset; the story
file is compared by the transaction's reconcile), and the ledger is re-anchored there with a
`tamper_detected` entry. Only `unblock --reset-retries` lowers the counters, with its own entry,
written to the copies first like any other.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_sdlc.git.blobrefs import BlobRefs
from ai_sdlc.statehome import ProjectState
from ai_sdlc.workflow.state.ledger import LedgerState, Tail, line_hash

LEDGER_REF = "refs/ai-sdlc/ledger/"


@dataclass
class Copy:
    """One copy: where it is and its bytes (None: there is none). `counts_only`: it holds the
    counters (`counters_blob`), not a whole entry."""

    place: str
    line: bytes | None
    counts_only: bool = False


@dataclass
class Anchoring:
    """How a transaction starts: the state, what the next entry chains onto, what was found."""

    state: LedgerState
    #: sha256 of the ledger file's last line: the next entry's `prev`.
    prev: str
    #: Tamper findings (empty when the ledger and its copies agree).
    found: list[str] = field(default_factory=list)
    #: Where the figures came from when `found` (each record and its total).
    sources: dict[str, int] = field(default_factory=dict)
    #: The copies must be written even if the transaction changes nothing (missing, behind).
    rewrite: bool = False


def counters_blob(state: LedgerState) -> bytes:
    """What the git ref holds: the chain and the counters (it changes only when they do, so
    the ref is moved by at most one git process per counted recovery)."""
    kinds = {k: v for k, v in sorted(state.breakdown.items()) if v}
    body = {"chain": state.chain, "total": state.total, "breakdown": kinds}
    return json.dumps(body, sort_keys=True).encode("utf-8")


_NOTHING_COUNTED = counters_blob(LedgerState())


class Mirrors:
    """The copies of one project's ledger heads: every entry in the user's state folder, the
    counters in the git ref (see the module's docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = ProjectState(root)
        self._refs: BlobRefs | None = None
        self._looked = False
        #: What each story's ref holds, as last read or written by this process.
        self._held: dict[str, bytes | None] = {}

    @property
    def refs(self) -> BlobRefs | None:
        if not self._looked:
            self._refs = BlobRefs.of_project(self.root)
            self._looked = True
        return self._refs

    def ref(self, story_id: str) -> str:
        return ledger_ref(self.root, story_id)

    def read(self, story_id: str, tail: Tail) -> list[Copy]:
        """Every copy; the ref is read without starting git when it holds the ledger's
        counters."""
        name = f"ledger/{story_id}.jsonl"
        copies = [Copy(str(self.home.folder / name), self.home.last_line(name))]
        refs = self.refs
        if refs is not None:
            ref = self.ref(story_id)
            expected = counters_blob(tail.state) if tail.line else b""
            held = expected if expected and refs.holds(ref, expected) else refs.read(ref)
            self._held[story_id] = held
            copies.append(Copy(f"git ref {ref}", held, counts_only=True))
        return copies

    def write(self, story_id: str, line: bytes, state: LedgerState) -> None:
        """Copy a new entry (before the ledger gets it); the ref only when its counters are not
        what the ref holds."""
        self.home.append(f"ledger/{story_id}.jsonl", line)
        refs = self.refs
        if refs is None:
            return
        blob = counters_blob(state)
        held = self._held.get(story_id)
        if held != blob and not (held is None and blob == _NOTHING_COUNTED):
            refs.write(self.ref(story_id), blob)
            self._held[story_id] = blob


def forget_project(root: Path) -> None:
    """A project created anew where another was (`ai-sdlc init` made its stories folder): the
    records of the old one (ledger copies, accepted guardrail settings) must not be taken for
    its stories', which reuse the same ids."""
    ProjectState(root).clear()
    refs = BlobRefs.of_project(root)
    if refs is not None:
        refs.remove_all(ledger_ref(root, ""))


def ledger_ref(root: Path, story_id: str) -> str:
    """`refs/ai-sdlc/ledger/<id>` for a project at the top of its repository's main checkout;
    elsewhere (a subfolder of a monorepo, a linked worktree: other projects may share the git
    folder and their story ids) `refs/ai-sdlc/ledger/<hash of the project's path>/<id>`."""
    if (root / ".git").is_dir():
        return LEDGER_REF + story_id
    key = hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{LEDGER_REF}{key[:12]}/{story_id}"


def assess(
    tail: Tail, copies: list[Copy], events: Callable[[], tuple[int, dict[str, int]]]
) -> Anchoring:
    """Compare the ledger's end with its copies (see the module's docstring); `events` gives
    the story's events' highest counters (read only when something is wrong)."""
    found = list(tail.problems)
    entry_seq = tail.state.seq if tail.line else 0
    newest: LedgerState | None = None  # the newest whole copy: written by ai-sdlc
    records: dict[str, LedgerState] = {}
    if tail.line:
        records["ledger"] = tail.state
    missing = False
    ahead: LedgerState | None = None
    counted: list[tuple[str, LedgerState]] = []
    for copy in copies:
        if copy.line is None:
            # the ref is first written when something is counted (a run that counts nothing
            # starts no git process for it)
            counted_nothing = counters_blob(tail.state) == _NOTHING_COUNTED
            missing = missing or not (copy.counts_only and counted_nothing)
            continue
        data = _entry(copy.line)
        if data is None or ("seq" not in data and not copy.counts_only):
            found.append(f"{copy.place} cannot be read")
            continue
        state = LedgerState.from_json(data)
        records[copy.place] = state
        if copy.counts_only:
            counted.append((copy.place, state))
            continue
        if newest is None or state.seq > newest.seq:
            newest = state
        if tail.line and copy.line == tail.line:
            continue
        if state.seq == entry_seq + 1 and data.get("prev") == tail.last_hash:
            ahead = state  # written before the ledger, which the process never reached
        elif not tail.line:
            found.append(
                f"the ledger has no entry, but {copy.place} holds entry {state.seq} "
                f"(total {state.total})"
            )
        elif state.seq > entry_seq:
            found.append(
                f"the ledger ends at entry {entry_seq} (total {tail.state.total}), but "
                f"{copy.place} holds entry {state.seq} (total {state.total}): it was shortened"
            )
        elif state.seq < entry_seq:
            found.append(
                f"the ledger holds entries up to {entry_seq} (total {tail.state.total}) that "
                f"{copy.place} (entry {state.seq}, total {state.total}) never saw: lines were "
                "added outside ai-sdlc"
            )
        else:
            found.append(f"the ledger's entry {entry_seq} differs from {copy.place}: rewritten")
    current = ahead or (tail.state if tail.line else None)
    # the ref moves after the state folder's copy and before the ledger: a crash between any
    # two leaves it equal to the ledger's counters or to those of the entry the copy is ahead by
    agreeing = {counters_blob(s) for s in (ahead, tail.state if tail.line else None) if s}
    for place, state in counted:
        if counters_blob(state) in agreeing:
            continue
        shown = "no entry" if current is None else f"total {current.total}"
        found.append(
            f"the ledger ({shown}, chain {0 if current is None else current.chain}) "
            f"disagrees with {place} (total {state.total}, chain {state.chain})"
        )
    if not found:
        best = ahead or tail.state
        return Anchoring(best.copy(), tail.last_hash, rewrite=missing or ahead is not None)
    base = (newest or (tail.state if tail.line else LedgerState())).copy()
    base.seq = max([s.seq for s in records.values()] + [base.seq])
    total, kinds = events()
    if total or kinds:
        records["events.jsonl"] = LedgerState(total=total, breakdown=dict(kinds))
    for state in records.values():
        for kind, n in state.breakdown.items():
            base.breakdown[kind] = max(base.breakdown.get(kind, 0), n)
        base.total = max(base.total, state.total)
    base.total = max(base.total, sum(base.breakdown.values()))
    sources = {place: state.total for place, state in records.items()}
    return Anchoring(base, tail.last_hash, found, sources, rewrite=True)


def events_high(path: Path) -> tuple[int, dict[str, int]]:
    """The highest counters the story's events recorded since its last reset (each event
    carries the counters after it); (0, {}) when there are none."""
    total, kinds = 0, dict[str, int]()
    try:
        data = path.read_bytes()
    except OSError:
        return total, kinds
    for raw in data.splitlines():
        event = _entry(raw)
        if event is None:
            continue
        if event.get("action") == "unblock" and event.get("reset_retries") is True:
            total, kinds = 0, {}
            continue
        counters = event.get("counters")
        if not isinstance(counters, dict):
            continue
        state = LedgerState.from_json(
            {
                "total": counters.get("total_recovery_attempts"),
                "breakdown": counters.get("recovery_breakdown"),
            }
        )
        total = max(total, state.total)
        for kind, n in state.breakdown.items():
            kinds[kind] = max(kinds.get(kind, 0), n)
    return total, kinds


def _entry(line: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


__all__ = [
    "LEDGER_REF",
    "Anchoring",
    "Copy",
    "Mirrors",
    "assess",
    "counters_blob",
    "events_high",
    "forget_project",
    "ledger_ref",
    "line_hash",
]
