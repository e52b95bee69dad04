"""A journal line is appended whole or not at all (`fsutil.append_whole`).

The short write is real: a child process lowers its file-size limit (RLIMIT_FSIZE) so that the
kernel writes only part of the line and then refuses the rest, as a full disk does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc.fsutil import append_whole

CHILD = r"""
import json, os, resource, signal, sys
from pathlib import Path
from ai_sdlc.fsutil import append_whole
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
size = path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, resource.RLIM_INFINITY))
try:
    append_whole(path, json.dumps({"seq": 3, "pad": "x" * 200}).encode() + b"\n")
except OSError as exc:
    print(exc.errno)
else:
    print("written")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_short_write_is_undone_and_raises(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    append_whole(path, json.dumps({"seq": 1}).encode() + b"\n")
    append_whole(path, json.dumps({"seq": 2}).encode() + b"\n")
    before = path.read_bytes()
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True
    )
    assert child.stdout.strip().isdigit(), child.stdout + child.stderr  # an errno, not written
    assert path.read_bytes() == before  # the 10 bytes the kernel took were cut back
    append_whole(path, json.dumps({"seq": 3}).encode() + b"\n")
    assert [json.loads(line)["seq"] for line in path.read_bytes().splitlines()] == [1, 2, 3]


def test_a_torn_tail_is_cut_back_and_a_link_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b'{"seq": 1}\n{"seq": 2, "to')
    append_whole(path, b'{"seq": 2}\n')
    assert path.read_bytes() == b'{"seq": 1}\n{"seq": 2}\n'
    only_torn = tmp_path / "torn.jsonl"
    only_torn.write_bytes(b'{"se')
    append_whole(only_torn, b'{"seq": 1}\n')
    assert only_torn.read_bytes() == b'{"seq": 1}\n'
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    with pytest.raises(OSError):
        append_whole(link, b'{"seq": 9}\n')
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    with pytest.raises(OSError):
        append_whole(folder, b'{"seq": 9}\n')
    assert path.read_bytes() == b'{"seq": 1}\n{"seq": 2}\n'
