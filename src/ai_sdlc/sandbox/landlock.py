"""Linux Landlock through ctypes: three system calls and one `prctl`, nothing else.

Why ctypes and not a PyPI binding: the bindings are young (0.x or dev releases), and what we
need is small and fixed (create a ruleset, add path and port rules, restrict the calling
thread). Every write-type right is handled and granted again only beneath the writable roots
(the ledger, the config and the git folder stay out of reach).

Reads: agents and test suites must read the whole machine (compilers, libraries), but not the
user's credential stores (`~/.ssh`, `~/.aws`...). Landlock has no deny rule, so `deny_read`
is turned into an allow-list (`readable_roots`): `/` whole, except that a folder holding a
denied path is split into its entries, recursively, leaving the denied ones out (the split
folders themselves keep READ_DIR: `ls ~` works, `cat ~/.ssh/id_ed25519` does not).

Network (ABI 4+): TCP connect and bind are handled when `connect_ports` is given, and connect
is granted again only to those ports (the agent's proxy); `()` means no TCP at all. UDP and
Unix sockets are not Landlock network rights.

A Landlock domain is inherited by every descendant and can only be narrowed by a later ruleset,
never widened.

This module imports the standard library only (`os`, `ctypes`): the launcher runs it with
`python -I -S` before the sandboxed program starts, so every import here is paid per process.
"""

import ctypes
import os
import stat

# System call numbers: Landlock came after the syscall table was unified, so they are the
# same on every Linux architecture.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2

# Filesystem access rights (linux/landlock.h). The read rights are handled only when some
# path is denied (`deny_read`); execution goes with reading.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: link or rename across folders
TRUNCATE = 1 << 14  # ABI 3

#: Rights a rule on a file (not a folder) may carry.
_FILE_RIGHTS = WRITE_FILE | TRUNCATE | READ_FILE | EXECUTE
READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR

# Network rights (ABI 4): TCP bind and connect, granted per port.
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
#: The first ABI with network rules.
NET_ABI = 4
_WRITE_ABI1 = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
)

# Scopes (ABI 6): no signal to, and no connection to an abstract Unix socket of, a process
# outside the sandbox's own domain.
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel header
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _NetPortAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


class LandlockError(OSError):
    """Landlock is missing, disabled, or refused a step."""


_libc: ctypes.CDLL | None = None


def _syscall() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.prctl.restype = ctypes.c_int
    return _libc


def _fail(what: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"{what}: {os.strerror(err)}")


def abi_version() -> int:
    """The kernel's Landlock ABI version (>= 1); raises LandlockError when it has none
    (ENOSYS: not built in; EOPNOTSUPP: not enabled at boot)."""
    libc = _syscall()
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    if version < 0:
        raise _fail("Landlock is not available")
    return int(version)


def write_rights(abi: int) -> int:
    """Every write-type right this ABI knows."""
    rights = _WRITE_ABI1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def readable_roots(deny: list[str], keep: list[str] | None = None) -> list[tuple[str, bool]] | None:
    """None when no path of `deny` exists (reads stay open), else the read allow-list that
    leaves out every path in `deny` (resolved): (path, whole) pairs, `whole` False for a folder
    split because it holds a denied path (it keeps only READ_DIR). Folders in `keep` that hold
    no denied path are readable whole (the workspace under a denied folder). Symbolic links
    among split entries are left out: their targets are readable wherever they are allowed."""
    denied = {os.path.realpath(p) for p in deny if os.path.lexists(p)}
    if not denied:
        return None
    found: list[tuple[str, bool]] = []

    def holds(folder: str) -> bool:
        prefix = folder.rstrip("/") + "/"
        return any(d.startswith(prefix) for d in denied)

    def split(folder: str) -> None:
        found.append((folder, False))
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            path = os.path.join(folder, name)
            if path in denied or os.path.islink(path):
                continue
            if os.path.isdir(path) and holds(path):
                split(path)
            else:
                found.append((path, True))

    if "/" not in denied:
        split("/")
    for path in keep or ():
        real = os.path.realpath(path)
        if os.path.isdir(real) and not holds(real) and real not in denied:
            found.append((real, True))
    return found


def restrict(
    writable: list[str],
    abi: int | None = None,
    *,
    deny_read: list[str] | None = None,
    connect_ports: list[int] | None = None,
) -> int:
    """Restrict this process (and every future descendant) to writing only beneath the
    `writable` paths (folders or files; missing ones are skipped: less access, never more).
    `deny_read`: paths no read (nor execution) may reach (see `readable_roots`; None or empty:
    reads stay open). `connect_ports`: the only TCP ports it may connect to, binding none
    (None: the network stays open; needs ABI 4, else LandlockError). From ABI 6 also scope
    signals and abstract Unix sockets. Returns the ABI used."""
    version = abi_version() if abi is None else abi
    libc = _syscall()
    handled = write_rights(version)
    reads = readable_roots(list(deny_read), list(writable)) if deny_read else None
    if reads is not None:
        handled |= READ_RIGHTS
    attr = _RulesetAttr(handled, 0, 0)
    size = 8  # ABI 1-3 know only handled_access_fs; a longer struct must end in zeros
    if connect_ports is not None:
        if version < NET_ABI:
            raise LandlockError(0, f"Landlock ABI {version} has no network rules (needs 4)")
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if version >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = ctypes.sizeof(_RulesetAttr)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise _fail("cannot create a Landlock ruleset")
    try:
        write = handled & ~READ_RIGHTS
        for path in writable:
            _add_path(libc, ruleset, path, write)
        for path, whole in reads or ():
            _add_path(libc, ruleset, path, READ_RIGHTS if whole else READ_DIR)
        for port in connect_ports or ():
            rule = _NetPortAttr(NET_CONNECT_TCP, port)
            if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(rule), 0):
                raise _fail(f"cannot add a Landlock rule for TCP port {port}")
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise _fail("cannot set no_new_privs")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0):
            raise _fail("cannot restrict this process with Landlock")
    finally:
        os.close(ruleset)
    return version


def _add_path(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    """Grant `rights` beneath `path` (a file gets those a file rule may carry); a path that
    is gone is skipped."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        allowed = rights if stat.S_ISDIR(os.fstat(fd).st_mode) else rights & _FILE_RIGHTS
        if not allowed:
            return
        rule = _PathBeneathAttr(allowed, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
            raise _fail(f"cannot add a Landlock rule for {path}")
    finally:
        os.close(fd)
