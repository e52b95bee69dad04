"""Run-level stop conditions: when an unattended run is clearly failing, halt it.

Pure functions of the run's statistics, evaluated after every story outcome in priority order
(total attempts, consecutive fails, reject rate, retry rate); the first that trips is the
recorded reason. The run-wide attempt cap is also checked before every phase, so a run never
starts attempt N+1. Rates judge only once `min_attempted` stories were attempted, so the first
failure of a run does not halt it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ai_sdlc.config import Config
from ai_sdlc.wording import count
from ai_sdlc.workflow.runs.runstate import (
    BLOCKED,
    DONE,
    STORY_FAILED,
    WAITING,
    RunCounters,
    StopReason,
    StoryRunState,
)

MAX_TOTAL_ATTEMPTS = "max_total_attempts"
MAX_CONSECUTIVE_FAILS = "max_consecutive_fails"
MAX_REJECT_RATE = "max_reject_rate"
MAX_RETRY_RATE = "max_retry_rate"


@dataclass(frozen=True)
class StopConditions:
    max_retry_rate: float = 0.5
    max_reject_rate: float = 0.3
    max_consecutive_fails: int = 3
    max_total_attempts: int = 50
    min_attempted: int = 4

    @classmethod
    def from_config(cls, config: Config) -> StopConditions:
        stop = config.typed().run.stop_conditions
        return cls(
            max_retry_rate=stop.max_retry_rate,
            max_reject_rate=stop.max_reject_rate,
            max_consecutive_fails=stop.max_consecutive_fails,
            max_total_attempts=stop.max_total_attempts,
            min_attempted=stop.min_attempted,
        )


@dataclass(frozen=True)
class RunStatistics:
    """What the run did, over all its segments (a resumed run counts the stories finished
    before the resume too), and the rates the stop conditions judge, over the current segment."""

    total_stories: int
    #: Stories the run has worked on (at least one outcome).
    attempted: int
    #: Done (approved by the review and complete).
    approved: int
    #: Ended blocked: escalated by a guardrail (a recovery or phase limit, a bounce loop, a
    #: refinement or review rejection).
    blocked: int
    #: Of the blocked, those a REJECTED decision (refinement or review) sent there.
    rejected: int
    #: Their last try crashed.
    failed: int
    #: Waiting at a stage gate for `ai-sdlc approve`.
    waiting: int
    #: Needed any retry: a recovery of any kind, or a crash.
    retried: int
    #: Over the stories attempted in the current segment (what `min_attempted` judges).
    retry_rate: float
    reject_rate: float
    segment_attempted: int
    #: Of those, blocked or failed, and retried (what the rates are made of).
    segment_failing: int
    segment_retried: int
    consecutive_fails: int
    #: Every phase call, and the attempts at the work (implement, rework) the cap counts.
    total_attempts: int
    implementation_attempts: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compute_statistics(
    stories: Iterable[StoryRunState], counters: RunCounters, *, segment: int | None = None
) -> RunStatistics:
    """The run's figures over every segment. With `segment`, the rates (and
    `segment_attempted`, which `min_attempted` judges) cover only the stories attempted since
    that resume: a failure loop the operator has fixed does not halt the resumed run again.
    Totals (attempts, streaks, budgets) carry over."""
    items = list(stories)
    worked = [s for s in items if s.outcomes > 0]
    now = [s for s in worked if segment is None or s.segment == segment]
    failing = sum(1 for s in now if s.status in (BLOCKED, STORY_FAILED))
    retried_now = sum(1 for s in now if s.retries > 0 or s.errors > 0)
    blocked = [s for s in worked if s.status == BLOCKED]
    return RunStatistics(
        total_stories=len(items),
        attempted=len(worked),
        approved=sum(1 for s in worked if s.status == DONE),
        blocked=len(blocked),
        rejected=sum(1 for s in blocked if s.rejections > 0),
        failed=sum(1 for s in worked if s.status == STORY_FAILED),
        waiting=sum(1 for s in worked if s.status == WAITING),
        retried=sum(1 for s in worked if s.retries > 0 or s.errors > 0),
        retry_rate=_rate(retried_now, len(now)),
        reject_rate=_rate(failing, len(now)),
        segment_attempted=len(now),
        segment_failing=failing,
        segment_retried=retried_now,
        consecutive_fails=counters.consecutive_fails,
        total_attempts=counters.total_attempts,
        implementation_attempts=counters.implementation_attempts,
    )


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


#: The phases whose attempts the run-wide cap counts: attempts at the work itself, as the
#: design's circuit breaker counts a story's attempts (not every phase call: a healthy story
#: makes 5-6 of those, and the default 50 would stop a run after 8 stories).
CAPPED_PHASES = frozenset({"implement", "rework"})


def attempts_exhausted(
    attempts: int, conditions: StopConditions, *, left: int | None = None
) -> StopReason | None:
    """The run-wide circuit breaker: no implementation attempt beyond `max_total_attempts`
    in one run segment. `left`: the stories not finished yet (named in the message)."""
    limit = conditions.max_total_attempts
    if attempts < limit:
        return None
    rest = ""
    if left is not None:
        rest = (
            f"; {left} {'story is' if left == 1 else 'stories are'} left: go on with "
            "'ai-sdlc run --continue' (another "
            f"{count(limit, 'attempt')}), or set this run's cap with 'ai-sdlc run --continue "
            "--max-attempts N'"
        )
    return StopReason(
        MAX_TOTAL_ATTEMPTS,
        attempts,
        limit,
        f"the run made {count(attempts, 'implementation attempt')}, the run-wide limit "
        f"(run.stop_conditions.{MAX_TOTAL_ATTEMPTS} = {limit}){rest}",
    )


def evaluate(stats: RunStatistics, conditions: StopConditions) -> StopReason | None:
    """The first stop condition that trips after a story's outcome, in priority order, or None
    (the attempt cap is `attempts_exhausted`, checked before each attempt)."""
    if stats.consecutive_fails >= conditions.max_consecutive_fails:
        return StopReason(
            MAX_CONSECUTIVE_FAILS,
            stats.consecutive_fails,
            conditions.max_consecutive_fails,
            f"{count(stats.consecutive_fails, 'story')} in a row failed "
            f"(run.stop_conditions.{MAX_CONSECUTIVE_FAILS} = "
            f"{conditions.max_consecutive_fails})",
        )
    if stats.segment_attempted < conditions.min_attempted:
        return None
    if stats.reject_rate > conditions.max_reject_rate:
        return StopReason(
            MAX_REJECT_RATE,
            stats.reject_rate,
            conditions.max_reject_rate,
            f"reject rate {stats.reject_rate:.2f} is above "
            f"run.stop_conditions.{MAX_REJECT_RATE} = {conditions.max_reject_rate:g} "
            f"({stats.segment_failing} of {stats.segment_attempted} attempted stories were "
            "blocked or failed)",
        )
    if stats.retry_rate > conditions.max_retry_rate:
        return StopReason(
            MAX_RETRY_RATE,
            stats.retry_rate,
            conditions.max_retry_rate,
            f"retry rate {stats.retry_rate:.2f} is above "
            f"run.stop_conditions.{MAX_RETRY_RATE} = {conditions.max_retry_rate:g} "
            f"({stats.segment_retried} of {stats.segment_attempted} attempted stories needed "
            "a retry)",
        )
    return None
