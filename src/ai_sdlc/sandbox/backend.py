"""Sandbox backends: how a command line is wrapped so that it runs confined.

A backend answers two questions: is it usable here (`available`), and what argument list runs
`argv` under a policy (`wrap`). Only Linux Landlock is implemented; a macOS backend would wrap
the command in `sandbox-exec -p <profile>` (a Seatbelt profile that allows everything but
`file-write*` outside the policy's writable roots) and slot in through `select_backend`.

`AI_SDLC_SANDBOX=off` makes every backend unavailable: a diagnostic switch (is the sandbox what
breaks this tool?) that also lets tests exercise the "no sandbox here" path through the real
CLI. It can never widen a sandbox in force; it only takes the run down the unavailable path,
which `run --auto`/`watch` refuse by default (`sandbox.required`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Protocol

import msgspec

#: The diagnostic switch: `off` (or `0`, `false`, `no`) makes no backend available.
SANDBOX_ENV = "AI_SDLC_SANDBOX"
_OFF = frozenset({"off", "0", "false", "no"})
LAUNCHER = Path(__file__).with_name("launcher.py")


def _launch_code() -> str | None:
    """The program `python -I -S -c` runs: the launcher with the `landlock` and `pidns`
    modules, all read
    from disk once, when ai-sdlc starts (this module is imported before any child runs), and
    handed over in memory: a child that rewrites either file (e.g. through a uv cache hard
    link) changes nothing a later launcher runs. Compiled here and passed as marshalled code
    (the same interpreter runs it), which saves each launcher compiling ~15 kB of source.
    None when the files cannot be read."""
    import marshal

    try:
        names = ("landlock.py", "pidns.py", "launcher.py")
        sources = [LAUNCHER.with_name(n).read_text("utf-8") for n in names]
        landlock, pidns, launcher = (
            marshal.dumps(compile(text, f"ai-sdlc:{name}", "exec", optimize=2)).hex()
            for text, name in zip(sources, names, strict=True)
        )
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    return (
        "# ai-sdlc's sandbox launcher.py\n"  # how people (and `ps`) tell what it is
        "import marshal, sys\n"
        "m = type(sys)('landlock')\n"
        f"exec(marshal.loads(bytes.fromhex('{landlock}')), m.__dict__)\n"
        "sys.modules['landlock'] = m\n"
        "m = type(sys)('pidns')\n"
        f"exec(marshal.loads(bytes.fromhex('{pidns}')), m.__dict__)\n"
        "sys.modules['pidns'] = m\n"
        f"exec(marshal.loads(bytes.fromhex('{launcher}')), {{'__name__': '__main__'}})\n"
    )


#: The launcher's code, as it was when this process started (an immutable string).
LAUNCH_CODE = _launch_code()


class Availability(msgspec.Struct, frozen=True):
    """Whether a backend can confine processes here, and a one-line detail for people."""

    usable: bool
    detail: str
    abi: int | None = None


class Backend(Protocol):
    """A way of running a command confined to a policy's writable roots."""

    name: str

    def available(self) -> Availability: ...

    def wrap(
        self,
        argv: Sequence[str],
        writable: Sequence[str],
        *,
        lifeline: int | None = None,
        deny_read: Sequence[str] = (),
        connect_ports: Sequence[int] | None = None,
        pidns: bool = False,
        read_only: Sequence[str] = (),
    ) -> list[str]:
        """The argument list that runs `argv` writing only beneath `writable`, reading
        nothing of `deny_read`, connecting over TCP only to `connect_ports` (None: any).
        `pidns`: in a PID namespace of its own where possible, with `read_only` (paths inside
        `writable`) bound read-only in its mount namespace. `argv[0]` is the resolved
        executable, `argv[1:]` the original argument list (its own argv[0] first).
        `lifeline`: an inherited pipe end that reads end-of-file when the process that
        started the child dies (the launcher then ends the child's whole tree)."""
        ...


class LandlockBackend:
    """Linux Landlock (kernel 5.13+), applied by the launcher to the command it starts."""

    name = "landlock"

    def available(self) -> Availability:
        return _landlock_availability()

    def wrap(
        self,
        argv: Sequence[str],
        writable: Sequence[str],
        *,
        lifeline: int | None = None,
        deny_read: Sequence[str] = (),
        connect_ports: Sequence[int] | None = None,
        pidns: bool = False,
        read_only: Sequence[str] = (),
    ) -> list[str]:
        if LAUNCH_CODE is None:
            raise RuntimeError(f"the sandbox launcher cannot be read ({LAUNCHER})")
        launcher = [sys.executable, "-I", "-S", "-c", LAUNCH_CODE]
        if lifeline is not None:
            launcher += ["--lifeline", str(lifeline)]
        for path in writable:
            launcher += ["--rw", path]
        for path in read_only:
            launcher += ["--ro", path]
        for path in deny_read:
            launcher += ["--deny", path]
        if connect_ports is not None:
            launcher += ["--tcp", ",".join(str(port) for port in connect_ports)]
        if pidns:
            launcher.append("--pidns")
        return [*launcher, "--", *argv]


@cache
def _landlock_availability() -> Availability:
    """Asked once per process: the kernel does not change under us."""
    if not sys.platform.startswith("linux"):
        return Availability(False, f"no sandbox backend for {sys.platform} (Landlock is Linux)")
    if LAUNCH_CODE is None or not sys.executable:  # e.g. a zipped or frozen install
        return Availability(False, f"the sandbox launcher cannot be run ({LAUNCHER})")
    from ai_sdlc.sandbox import landlock

    try:
        abi = landlock.abi_version()
    except OSError as exc:
        return Availability(False, f"the kernel has no usable Landlock ({exc.strerror})")
    scoped = "; signals and abstract sockets scoped" if abi >= 6 else ""
    return Availability(True, f"Landlock ABI {abi}{scoped}", abi)


class Unavailable:
    """No backend: every question answers why."""

    name = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def available(self) -> Availability:
        return Availability(False, self.reason)

    def wrap(
        self,
        argv: Sequence[str],
        writable: Sequence[str],
        *,
        lifeline: int | None = None,
        deny_read: Sequence[str] = (),
        connect_ports: Sequence[int] | None = None,
        pidns: bool = False,
        read_only: Sequence[str] = (),
    ) -> list[str]:
        raise RuntimeError(f"no sandbox backend: {self.reason}")


def select_backend(environ: Mapping[str, str]) -> Backend:
    """The backend for this platform (an `Unavailable` one says why there is none)."""
    switch = environ.get(SANDBOX_ENV, "").strip().lower()
    if switch in _OFF:
        return Unavailable(f"turned off by {SANDBOX_ENV}={environ[SANDBOX_ENV]} (a diagnostic)")
    if sys.platform.startswith("linux"):
        landlock = LandlockBackend()
        if landlock.available().usable:
            return landlock
        return Unavailable(landlock.available().detail)
    return Unavailable(f"no sandbox backend for {sys.platform} yet (macOS sandbox-exec planned)")
