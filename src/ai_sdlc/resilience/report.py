"""The persisted resilience figures of a project as one plain dict (`ai-sdlc metrics`)."""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ai_sdlc.resilience.breaker import CircuitState
from ai_sdlc.resilience.config import POLICY_NAMES
from ai_sdlc.resilience.metrics import summarize_breaker, summarize_policy
from ai_sdlc.resilience.persistence import BreakerStore, MetricsStore, StateDir


def metrics_report(
    project_root: Path, *, wall_clock: Callable[[], float] = time.time
) -> dict[str, Any]:
    """Every policy (zeros when unused) and every breaker seen, with its current state."""
    state = StateDir(project_root)
    raw = MetricsStore(state).load()
    records = BreakerStore(state).load_all()
    now = wall_clock()
    raw_policies = raw.get("policies")
    raw_policies = raw_policies if isinstance(raw_policies, dict) else {}
    names = list(POLICY_NAMES) + sorted(set(raw_policies) - set(POLICY_NAMES))
    policies = {name: summarize_policy(_dict(raw_policies.get(name))) for name in names}
    raw_breakers = raw.get("breakers")
    raw_breakers = raw_breakers if isinstance(raw_breakers, dict) else {}
    breakers: dict[str, Any] = {}
    for name in sorted(set(raw_breakers) | set(records)):
        summary = summarize_breaker(_dict(raw_breakers.get(name)))
        record = records.get(name)
        stored = record.state if record else CircuitState.CLOSED
        retry_in: float | None = 0.0
        open_until = None
        effective = stored
        if record is not None and stored is CircuitState.OPEN:
            if record.forced:
                retry_in = None
            else:
                retry_in = round(max(0.0, (record.open_until or now) - now), 1)
                if record.open_until is not None:
                    open_until = _iso(record.open_until)
                if retry_in == 0:
                    effective = CircuitState.HALF_OPEN
        breakers[name] = {
            "state": effective.value,
            "forced_open": bool(record and record.forced),
            "retry_in": retry_in,
            "open_until": open_until,
            **summary,
        }
    updated = raw.get("updated_at")
    return {
        "project": str(project_root),
        "updated_at": updated if isinstance(updated, str) else None,
        "policies": policies,
        "breakers": breakers,
    }


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _iso(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).isoformat(timespec="seconds")
