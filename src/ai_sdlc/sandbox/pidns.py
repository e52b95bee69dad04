"""A PID namespace of its own for a sandboxed command: it sees no process but its own.

Why: `/proc/<pid>/environ` of ai-sdlc (and of the shell that started it) holds the AI keys and
every other secret of the user's environment. A same-user child may read it unless the
process is non-dumpable, and root (CI, dev containers) reads it regardless, Landlock or not
(measured on Linux 6.18). In a new PID namespace with a fresh `/proc` mounted in a new mount
namespace, the command's `/proc` lists only the namespace's processes; Landlock then forbids
any later mount, so it cannot mount another `/proc` to look out, even as root.

Root unshares the PID and mount namespaces directly; another user needs an unprivileged user
namespace as well (mapped to the same uid and gid, so files keep their owners). Where the kernel
refuses (user namespaces turned off, a seccomp filter), `enter` says so and the launcher goes
on without; where `/proc` cannot be mounted in it (a container's masked `/proc` seen from a user
namespace) the namespace still ends whatever the command leaves. `doctor` shows which
(`Sandbox.pid_namespace`).

Standard library only: handed to the launcher in memory with it (`backend.LAUNCH_CODE`, never
read from disk at child time) and run with `python -I -S` for every process.
"""

import ctypes
import os

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_RDONLY = 1
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_MS_RELATIME = 1 << 21
#: `statvfs` flags a read-only remount of a bind must keep: in a user namespace the kernel
#: refuses to clear the locked ones (nosuid, nodev, noexec, the atime mode) of the mount below.
_KEPT = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | 1024 | 2048  # noatime, nodiratime
_ST_RELATIME = 4096


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def enter() -> bool:
    """Unshare a PID namespace (for the next child: it becomes the namespace's first process)
    and a mount namespace; True when done, False when the kernel refuses (OSError when a user
    namespace was made but cannot be mapped: the caller must not go on in it)."""
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWPID | _CLONE_NEWNS | (_CLONE_NEWUSER if uid else 0)
    if _libc().unshare(flags) != 0:
        return False
    if uid:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    return True


def make_private() -> None:
    """In the namespace's first process: no mount made here reaches the host's mount table
    (OSError when refused: then nothing may be mounted)."""
    if _libc().mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot make mounts private: {os.strerror(err)}")


def bind_read_only(path: str) -> None:
    """After `make_private`: `path` (a file or folder) read-only in this mount namespace: a
    write is refused (EROFS), and so are a rename over it and its removal (EBUSY: a mount
    point). OSError when refused."""
    libc = _libc()
    name = os.fsencode(path)
    if libc.mount(name, name, None, _MS_BIND, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot bind {path}: {os.strerror(err)}")
    found = os.statvfs(path).f_flag
    flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | (found & _KEPT)
    if found & _ST_RELATIME:
        flags |= _MS_RELATIME
    if libc.mount(None, name, None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot make {path} read-only: {os.strerror(err)}")


def mount_proc() -> None:
    """After `make_private`: mount a `/proc` that shows this namespace only (OSError when
    refused)."""
    libc = _libc()
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if libc.mount(b"proc", b"/proc", b"proc", flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot mount /proc: {os.strerror(err)}")
