"""Served counts of scripted rules with `times`, persisted across `ai-sdlc` processes.

Tests drive the CLI once per step, so "serve this fault twice, then answer" must be counted on
disk: `<project>/.ai-sdlc/state/scripted-usage.json`, read-modify-written under a sidecar lock
sidecar and replaced atomically. Counts are keyed by the rules file's hash, so editing the rules
starts afresh.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ai_sdlc.errors import InvalidInputError
from ai_sdlc.fsutil import atomic_write_text
from ai_sdlc.locks import LockTimeout, SidecarLock
from ai_sdlc.providers.base import ProviderError, ProviderRequest
from ai_sdlc.providers.scripted_rules import Rule

LOCK_TIMEOUT_SECONDS = 60.0
_FORMAT_VERSION = 1


class ServedCounts:
    """Chooses the rule that serves a request and counts it when it has a `times` budget."""

    def __init__(self, state_path: Path, rules_digest: str | None) -> None:
        self.state_path = state_path
        self.rules_digest = rules_digest
        self._lock_path = state_path.with_name(state_path.name + ".lock")

    def select(self, rules: Sequence[Rule], request: ProviderRequest) -> Rule | None:
        """The first matching rule whose budget is not spent (None: use the defaults)."""
        candidates = [rule for rule in rules if rule.matches(request)]
        if not candidates:
            return None
        if candidates[0].times is None:
            return candidates[0]
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with SidecarLock(self._lock_path, timeout=LOCK_TIMEOUT_SECONDS):
                served = self._read()
                for rule in candidates:
                    if rule.times is None:
                        return rule
                    key = str(rule.number)
                    if served.get(key, 0) < rule.times:
                        served[key] = served.get(key, 0) + 1
                        self._write(served)
                        return rule
        except LockTimeout as exc:
            raise ProviderError(
                f"waited {LOCK_TIMEOUT_SECONDS:.0f}s for {self._lock_path}",
                hint="another ai-sdlc process holds it; if none runs, delete the .lock file",
            ) from exc
        return None

    def served(self) -> dict[str, int]:
        """Served counts by rule number (as text) for the current rules file."""
        return self._read()

    def _read(self) -> dict[str, int]:
        try:
            text = self.state_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
            if data.get("rules_sha256") != self.rules_digest:
                return {}
            served = data["served"]
            if not isinstance(served, dict) or not all(
                isinstance(k, str) and isinstance(v, int) for k, v in served.items()
            ):
                raise ValueError("'served' is not a mapping of rule numbers to counts")
            return dict(served)
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            raise InvalidInputError(
                f"the scripted usage state is damaged: {exc}",
                path=str(self.state_path),
                hint="delete the file to reset the scripted rules' served counts",
            ) from exc

    def _write(self, served: dict[str, int]) -> None:
        payload = {"version": _FORMAT_VERSION, "rules_sha256": self.rules_digest, "served": served}
        atomic_write_text(self.state_path, json.dumps(payload, indent=2, sort_keys=True) + "\n")
