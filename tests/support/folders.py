"""Temp folders a test process owns for its whole life (templates, the suite's config and
state homes)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path


def process_folder(prefix: str) -> Path:
    """A temp folder of this process, removed when it exits (by this process only: a forked
    child that exits normally leaves it to its parent)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:
            shutil.rmtree(folder, ignore_errors=True)

    atexit.register(remove)
    return folder
