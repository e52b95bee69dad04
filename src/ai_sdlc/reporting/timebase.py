"""Times in a run report: parsing the recorded ISO times, and the run's window (its start and
end), in which every moment becomes seconds since the start."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any


def parse_time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


@dataclass
class Window:
    start: dt.datetime
    end: dt.datetime

    def holds(self, moment: dt.datetime | None) -> bool:
        return moment is not None and self.start <= moment <= self.end

    def offset(self, moment: dt.datetime | None) -> float | None:
        if moment is None:
            return None
        return round((moment - self.start).total_seconds(), 3)


def iso_ms(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
