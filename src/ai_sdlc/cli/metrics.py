"""`ai-sdlc metrics`: retries and circuit breakers per policy, summed over every run."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.common import NotInitializedError
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.cli.terminal import Terminal
from ai_sdlc.resilience.report import metrics_report


def metrics(ctx: typer.Context, json: JsonOption = False) -> None:
    """Show retry and circuit-breaker figures per policy (llm, github, tool, verification)."""
    app = Application.of(ctx)
    out = app.terminal(json)
    root = app.project
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
    breakers: dict[str, dict[str, Any]] = report["breakers"]
    if not any(p["operations"] for p in policies.values()) and not breakers:
        out.info("No resilience metrics yet: 'ai-sdlc run' records them.")
        return
    if out.data_is_tty:
        out.table(_policy_table(policies))
        if breakers:
            out.table(_breaker_table(breakers))
    else:
        out.data("Retry policies")
        for name, p in policies.items():
            out.data(
                f"  {name}: " + ", ".join(f"{label} {value}" for label, value in _policy_cells(p))
            )
        if breakers:
            out.data("Circuit breakers")
        for name, b in breakers.items():
            out.data(
                f"  {name}: " + ", ".join(f"{label} {value}" for label, value in _breaker_cells(b))
            )
    if report["updated_at"]:
        out.data(f"updated {report['updated_at']}")


def _policy_cells(p: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("ops", str(p["operations"])),
        ("ok", str(p["successes"])),
        ("failed", str(p["failures"])),
        ("1st try", str(p["first_try_successes"])),
        ("after retry", str(p["successes_after_retry"])),
        ("exhausted", str(p["exhausted_retries"])),
        ("retries", str(p["retries"])),
        ("avg delay", f"{p['average_retry_delay']:.1f} s"),
        ("fail rate", f"{p['failure_rate']:.0%}"),
    ]


def _breaker_cells(b: dict[str, Any]) -> list[tuple[str, str]]:
    state = b["state"]
    if b["forced_open"]:
        state += " (forced)"
    elif b["state"] == "open":
        state += f" ({b['retry_in']:.0f} s left)"
    times = b["time_in_state"]
    return [
        ("state", state),
        ("calls", str(b["calls"])),
        ("ok", str(b["successful"])),
        ("failed", str(b["failed"])),
        ("rejected", str(b["rejected"])),
        ("changes", str(b["state_changes"])),
        ("closed", _duration(times["closed"])),
        ("open", _duration(times["open"])),
        ("half-open", _duration(times["half_open"])),
    ]


def _policy_table(policies: dict[str, dict[str, Any]]) -> Table:
    return _table("Retry policies", "policy", {n: _policy_cells(p) for n, p in policies.items()})


def _breaker_table(breakers: dict[str, dict[str, Any]]) -> Table:
    return _table(
        "Circuit breakers", "breaker", {n: _breaker_cells(b) for n, b in breakers.items()}
    )


def _table(title: str, key: str, rows: dict[str, list[tuple[str, str]]]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(key, no_wrap=True)
    first = next(iter(rows.values()))
    for label, _ in first:
        table.add_column(label, justify="left" if label == "state" else "right", no_wrap=True)
    for name, cells in rows.items():
        table.add_row(name, *(value for _, value in cells))
    return table


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def register(app: typer.Typer) -> None:
    app.command("metrics")(metrics)
