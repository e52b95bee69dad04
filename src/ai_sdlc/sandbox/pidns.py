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
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18


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


def mount_proc() -> None:
    """In the namespace's first process: keep mounts private, then mount a `/proc` that shows
    this namespace only (OSError when refused)."""
    libc = _libc()
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot make mounts private: {os.strerror(err)}")
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if libc.mount(b"proc", b"/proc", b"proc", flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot mount /proc: {os.strerror(err)}")
