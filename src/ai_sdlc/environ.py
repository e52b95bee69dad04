"""A decoded copy of the process environment, made again only when the environment changes.

`os.environ` decodes every name and value on each full read, and a story run reads the whole
environment for every git call, redaction, tool and verification command (about 40 times).
`current()` returns one read-only copy while the environment's raw table is unchanged (a C-level
dict comparison); `os.environ` keeps that table in `_data` (CPython, every platform). Any change
made through `os.environ` (or `os.putenv`'s callers in the standard library) gives a fresh copy.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from types import MappingProxyType

#: (the raw table when last copied, the decoded read-only copy).
_copy: tuple[dict[object, object], Mapping[str, str]] | None = None


def current() -> Mapping[str, str]:
    """The process environment as a read-only mapping (the same object while unchanged)."""
    global _copy
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        return MappingProxyType(dict(os.environ))
    cached = _copy
    if cached is not None and cached[0] == raw:
        return cached[1]
    decoded: Mapping[str, str] = MappingProxyType(dict(os.environ))
    _copy = (dict(raw), decoded)
    return decoded


def home_folder(env: Mapping[str, str]) -> str:
    """$HOME when it is an absolute path, else the account's home from the password database
    (a relative or empty HOME would put the user's files under the current folder)."""
    home = env.get("HOME", "")
    if posixpath.isabs(home):
        return home.rstrip("/") or "/"
    import pwd

    return pwd.getpwuid(os.getuid()).pw_dir.rstrip("/") or "/"
