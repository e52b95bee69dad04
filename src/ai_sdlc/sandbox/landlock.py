"""Linux Landlock through ctypes: three system calls and one `prctl`, nothing else.

Why ctypes and not a PyPI binding: the bindings are young (0.x or dev releases), and what we
need is small and fixed (create a ruleset, add path rules, restrict the calling thread). Why
only write rights: agents and test suites must read the whole machine (compilers, libraries,
the network for their API), and what must not happen is a *write* outside the story's
worktree (the ledger, the config, the git folder). Reads, execution and the network are left
unhandled, so Landlock allows them; every write-type right is handled and granted again only
beneath the writable roots. A Landlock domain is inherited by every descendant and can only be
narrowed by a later ruleset, never widened.

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

# Filesystem access rights (linux/landlock.h). EXECUTE (1<<0), READ_FILE (1<<2) and READ_DIR
# (1<<3) are deliberately absent: reads and execution stay open.
WRITE_FILE = 1 << 1
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
_FILE_RIGHTS = WRITE_FILE | TRUNCATE
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


def restrict(writable: list[str], abi: int | None = None) -> int:
    """Restrict this process (and every future descendant) to writing only beneath the
    `writable` paths (folders or files; missing ones are skipped: less access, never more).
    From ABI 6 also scope signals and abstract Unix sockets. Returns the ABI used."""
    version = abi_version() if abi is None else abi
    libc = _syscall()
    handled = write_rights(version)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8  # ABI 1-3 know only handled_access_fs; a longer struct must end in zeros
    if version >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = ctypes.sizeof(_RulesetAttr)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise _fail("cannot create a Landlock ruleset")
    try:
        for path in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                allowed = handled if is_dir else handled & _FILE_RIGHTS
                rule = _PathBeneathAttr(allowed, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                    raise _fail(f"cannot add a Landlock rule for {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise _fail("cannot set no_new_privs")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0):
            raise _fail("cannot restrict this process with Landlock")
    finally:
        os.close(ruleset)
    return version
