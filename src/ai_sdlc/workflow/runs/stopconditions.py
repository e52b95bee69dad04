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
        section = "run.stop_conditions."
        return cls(
            max_retry_rate=float(config.get(section + MAX_RETRY_RATE)),
            max_reject_rate=float(config.get(section + MAX_REJECT_RATE)),
            max_consecutive_fails=int(config.get(section + MAX_CONSECUTIVE_FAILS)),
            max_total_attempts=int(config.get(section + MAX_TOTAL_ATTEMPTS)),
            min_attempted=int(config.get(section + "min_attempted")),
        )


@dataclass(frozen=True)
class RunStatistics:
    total_stories: int
    #: Stories the run has worked on (at least one outcome).
    attempted: int
    #: Done (approved by the review and complete).
    approved: int
    #: Ended blocked by a guardrail (review FAILED, a limit, a bounce loop).
    rejected: int
    #: Their last try crashed.
    failed: int
    #: Waiting at a stage gate for `ai-sdlc approve`.
    waiting: int
    #: Needed any retry: a recovery of any kind, or a crash.
    retried: int
    retry_rate: float
    reject_rate: float
    consecutive_fails: int
    total_attempts: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compute_statistics(
    stories: Iterable[StoryRunState], counters: RunCounters, *, segment: int | None = None
) -> RunStatistics:
    """The run's figures. With `segment`, the rates (and `attempted`, which `min_attempted`
    judges) cover only the stories attempted since that resume: a failure loop the operator has
    fixed does not halt the resumed run again. Totals (attempts, streaks, budgets) carry over."""
    items = list(stories)
    worked = [s for s in items if s.outcomes > 0 and (segment is None or s.segment == segment)]
    attempted = len(worked)
    rejected = sum(1 for s in worked if s.status == BLOCKED)
    failed = sum(1 for s in worked if s.status == STORY_FAILED)
    retried = sum(1 for s in worked if s.retries > 0 or s.errors > 0)
    return RunStatistics(
        total_stories=len(items),
        attempted=attempted,
        approved=sum(1 for s in worked if s.status == DONE),
        rejected=rejected,
        failed=failed,
        waiting=sum(1 for s in worked if s.status == WAITING),
        retried=retried,
        retry_rate=_rate(retried, attempted),
        reject_rate=_rate(rejected + failed, attempted),
        consecutive_fails=counters.consecutive_fails,
        total_attempts=counters.total_attempts,
    )


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def attempts_exhausted(total_attempts: int, conditions: StopConditions) -> StopReason | None:
    """The run-wide circuit breaker: no attempt beyond `max_total_attempts`."""
    limit = conditions.max_total_attempts
    if total_attempts < limit:
        return None
    return StopReason(
        MAX_TOTAL_ATTEMPTS,
        total_attempts,
        limit,
        f"the run made {total_attempts} agent attempts, the run-wide limit "
        f"(run.stop_conditions.{MAX_TOTAL_ATTEMPTS} = {limit})",
    )


def evaluate(stats: RunStatistics, conditions: StopConditions) -> StopReason | None:
    """The first stop condition that trips, in priority order, or None."""
    exhausted = attempts_exhausted(stats.total_attempts, conditions)
    if exhausted:
        return exhausted
    if stats.consecutive_fails >= conditions.max_consecutive_fails:
        return StopReason(
            MAX_CONSECUTIVE_FAILS,
            stats.consecutive_fails,
            conditions.max_consecutive_fails,
            f"{stats.consecutive_fails} stories in a row failed "
            f"(run.stop_conditions.{MAX_CONSECUTIVE_FAILS} = "
            f"{conditions.max_consecutive_fails})",
        )
    if stats.attempted < conditions.min_attempted:
        return None
    if stats.reject_rate > conditions.max_reject_rate:
        return StopReason(
            MAX_REJECT_RATE,
            stats.reject_rate,
            conditions.max_reject_rate,
            f"reject rate {stats.reject_rate:.2f} is above "
            f"run.stop_conditions.{MAX_REJECT_RATE} = {conditions.max_reject_rate:g} "
            f"({stats.rejected + stats.failed} of {stats.attempted} attempted stories were "
            "rejected or failed)",
        )
    if stats.retry_rate > conditions.max_retry_rate:
        return StopReason(
            MAX_RETRY_RATE,
            stats.retry_rate,
            conditions.max_retry_rate,
            f"retry rate {stats.retry_rate:.2f} is above "
            f"run.stop_conditions.{MAX_RETRY_RATE} = {conditions.max_retry_rate:g} "
            f"({stats.retried} of {stats.attempted} attempted stories needed a retry)",
        )
    return None
