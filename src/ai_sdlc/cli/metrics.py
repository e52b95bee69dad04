"""`ai-sdlc metrics`: retries and circuit breakers per policy, summed over every run."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from ai_sdlc.cli.app import project_root
from ai_sdlc.cli.common import JsonOption, NotInitializedError, terminal
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.resilience.report import metrics_report


def metrics(json: JsonOption = False) -> None:
    """Show retry and circuit-breaker figures per policy (llm, github, tool, verification)."""
    out = terminal(json)
    root = project_root()
    if not (root / ".ai-sdlc").is_dir():
        raise NotInitializedError(
            f"no ai-sdlc project in {root}",
            hint="run 'ai-sdlc init' here, or pass --project <folder>",
        )
    report = metrics_report(root)
    if json:
        out.json(report)
    else:
        _render(out, report)


def _render(out: Terminal, report: dict[str, Any]) -> None:
    policies: dict[str, dict[str, Any]] = report["policies"]
    if not any(p["operations"] for p in policies.values()) and not report["breakers"]:
        out.info("No resilience metrics yet: 'ai-sdlc run' records them.")
        return
    table = Table(title="Retry policies", title_justify="left")
    for column in ("policy", "ops", "ok", "failed", "1st try", "after retry", "exhausted"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for column in ("retries", "avg delay", "fail rate"):
        table.add_column(column, justify="right")
    for name, p in policies.items():
        table.add_row(
            name,
            str(p["operations"]),
            str(p["successes"]),
            str(p["failures"]),
            str(p["first_try_successes"]),
            str(p["successes_after_retry"]),
            str(p["exhausted_retries"]),
            str(p["retries"]),
            f"{p['average_retry_delay']:.1f} s",
            f"{p['failure_rate']:.0%}",
        )
    out.render(table)
    if report["breakers"]:
        out.render(_breaker_table(report["breakers"]))
    if report["updated_at"]:
        out.info(f"updated {report['updated_at']}")


def _breaker_table(breakers: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="Circuit breakers", title_justify="left")
    table.add_column("breaker")
    table.add_column("state")
    for column in ("calls", "ok", "failed", "rejected", "changes", "closed", "open", "half-open"):
        table.add_column(column, justify="right")
    for name, b in breakers.items():
        state = b["state"]
        if b["forced_open"]:
            state += " (forced)"
        elif b["state"] == "open":
            state += f" ({b['retry_in']:.0f} s left)"
        times = b["time_in_state"]
        table.add_row(
            name,
            state,
            str(b["calls"]),
            str(b["successful"]),
            str(b["failed"]),
            str(b["rejected"]),
            str(b["state_changes"]),
            _duration(times["closed"]),
            _duration(times["open"]),
            _duration(times["half_open"]),
        )
    return table


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def register(app: typer.Typer) -> None:
    app.command("metrics")(metrics)
