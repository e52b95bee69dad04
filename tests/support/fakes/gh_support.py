"""Put the stand-in `gh` (tests/support/fakes/gh) on a test's PATH, run by this interpreter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

FAKE_GH = Path(__file__).parent / "gh"


def install_gh(bin_dir: Path) -> Path:
    """`bin_dir/gh`: the stand-in with a shebang naming the running interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    target = bin_dir / "gh"
    source = FAKE_GH.read_text(encoding="utf-8").split("\n", 1)[1]
    target.write_text(f"#!{sys.executable}\n{source}", encoding="utf-8")
    target.chmod(0o755)
    return target


def gh_calls(log: Path) -> list[list[str]]:
    """Every argv the stand-in was called with, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
