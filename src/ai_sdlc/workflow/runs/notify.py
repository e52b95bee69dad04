"""Tell someone a run halted: `notify.command` and/or `notify.webhook` from config.

The command runs without a shell (an argument list, or a command line split like a shell
splits words) with the diagnostic JSON on its stdin; the webhook gets the same JSON in a POST.
A notifier that fails or hangs is reported back as a failed result and never stops the run.
Webhook URLs often carry a secret token, so results name only the scheme and host.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ai_sdlc.config import Config
from ai_sdlc.secrets import redact
from ai_sdlc.verify import default_environment

DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class NotifyResult:
    channel: str
    ok: bool
    detail: str


class Notifier:
    def __init__(
        self,
        *,
        command: Sequence[str] | None,
        webhook: str | None,
        cwd: Path,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.command = list(command) if command else None
        self.webhook = webhook or None
        self.cwd = cwd
        self.timeout = timeout

    @classmethod
    def from_config(cls, config: Config, *, cwd: Path) -> Notifier:
        notify = config.typed().notify
        raw = notify.command
        command: list[str] | None = None
        if isinstance(raw, str) and raw.strip():
            command = shlex.split(raw)
        elif isinstance(raw, list) and raw:
            command = list(raw)
        return cls(command=command, webhook=notify.webhook, cwd=cwd)

    @property
    def enabled(self) -> bool:
        return bool(self.command or self.webhook)

    def send(self, payload: dict[str, Any]) -> list[NotifyResult]:
        body = redact(json.dumps(payload, ensure_ascii=False, default=str)).encode("utf-8")
        results = []
        if self.command:
            results.append(self._run_command(self.command, body))
        if self.webhook:
            results.append(self._post(self.webhook, body))
        return results

    def _run_command(self, argv: list[str], body: bytes) -> NotifyResult:
        name = f"command {argv[0]}"
        try:
            proc = subprocess.run(
                argv,
                input=body,
                capture_output=True,
                cwd=self.cwd,
                env=default_environment(),
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return NotifyResult(name, False, f"timed out after {self.timeout:g}s")
        except OSError as exc:
            return NotifyResult(name, False, f"cannot run: {exc.strerror or exc}")
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            tail = f": {err[-1][:200]}" if err else ""
            return NotifyResult(name, False, f"exited {proc.returncode}{tail}")
        return NotifyResult(name, True, "sent")

    def _post(self, url: str, body: bytes) -> NotifyResult:
        import urllib.error  # only a run with a webhook pays for urllib.request (~5 ms)
        import urllib.parse
        import urllib.request

        parts = urllib.parse.urlsplit(url)
        name = f"webhook {parts.scheme}://{parts.hostname or ''}"
        if parts.scheme not in ("http", "https"):
            return NotifyResult(name, False, "only http and https URLs are posted to")
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "ai-sdlc"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            return NotifyResult(name, False, f"HTTP {exc.code}")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return NotifyResult(name, False, f"not delivered: {reason}")
        return NotifyResult(name, True, f"HTTP {status}")
