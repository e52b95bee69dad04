"""The temp trees of earlier pytest runs are removed while this run works, not after it.

pytest keeps the last runs' `tmp_path` trees (`tmp_path_retention_count`, 3) and removes the
older ones when the session ends: after the last test, in one process, with nothing to overlap
it. A run of this suite leaves about 90,000 files; removing one such tree takes 8–10 s of wall
time on an ext4 disk mounted with online discard, almost all of it waiting on the disk, and
from the fourth run on every `make test` paid it at its end. Here the same trees are renamed to
pytest's own `garbage-*` names when the session starts and removed by a background `rm -rf`
while the tests run; the session waits for it before pytest's own clean-up, which then finds
nothing left. A tree still locked by another running session (pytest's `.lock` file) is left
alone, as pytest leaves it. tests/conftest.py takes the two hooks below; `-p
tests.support.earlier_runs` gives them to any other session.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

#: The background removal this session started (waited for at the session's end).
REMOVAL = pytest.StashKey["subprocess.Popen[bytes]"]()

_NUMBERED = re.compile(r"pytest-(\d+)")


def stale_runs(root: Path, current: Path, keep: int) -> list[Path]:
    """The numbered run folders under `root` that pytest would remove at the end of the run
    that owns `current`: all but the newest `keep` (the current one counted), never a folder
    another session still holds locked."""
    found = _NUMBERED.fullmatch(current.name)
    if found is None:
        return []
    newest_kept = int(found.group(1)) - max(keep, 1) + 1
    stale = []
    for path in root.iterdir():
        number = _NUMBERED.fullmatch(path.name)
        if number is None or int(number.group(1)) >= newest_kept or path == current:
            continue
        if path.is_symlink() or not path.is_dir() or (path / ".lock").exists():
            continue
        stale.append(path)
    return stale


def start_removal(paths: list[Path]) -> subprocess.Popen[bytes] | None:
    """Rename `paths` to pytest's `garbage-*` names (so that an interrupted removal is finished
    by pytest later) and remove them in a background process at the lowest priority."""
    renamed = []
    for path in paths:
        garbage = path.with_name(f"garbage-{uuid.uuid4()}")
        try:
            path.rename(garbage)
        except OSError:  # another session took it first
            continue
        renamed.append(str(garbage))
    remover = shutil.which("rm")
    nice = shutil.which("nice")
    if not renamed or remover is None:
        return None
    command = [nice, "-n", "19"] if nice else []
    return subprocess.Popen(
        [*command, remover, "-rf", "--", *renamed],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C of the suite does not stop it half-way
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    """In the controller of an xdist session (which always makes this run's numbered tree, for
    its workers): start removing what pytest would remove at its end. Nothing in a session that
    may make no tree at all (no workers, `--collect-only`), with `--basetemp` (pytest empties
    that folder itself, at once) or with pytest's retention policy `none`."""
    config = session.config
    if not config.pluginmanager.has_plugin("dsession") or config.option.basetemp:
        return
    if config.getini("tmp_path_retention_policy") == "none":
        return
    factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
    current = factory.getbasetemp()
    keep = int(config.getini("tmp_path_retention_count"))
    removal = start_removal(stale_runs(current.parent, current, keep))
    if removal is not None:
        config.stash[REMOVAL] = removal


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Wait for the removal before pytest's own clean-up looks at the folders."""
    removal = session.config.stash.get(REMOVAL, None)
    if removal is not None:
        removal.wait()
