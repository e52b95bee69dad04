"""The sandbox launcher: restrict this process with Landlock, then become the command.

Run as `python -I -S launcher.py [--rw PATH]... -- EXECUTABLE ARGV0 [ARG]...` (`-I -S`: no
site-packages, no environment-driven imports: the launcher starts in ~25 ms and nothing on the
project's path can run before the restriction). It restricts itself, then `execv`s the resolved
executable with the original argument list, so the command's process id, process group and
session are the ones `start_session` created, and its exit status is the command's own.

Fails closed: when the restriction cannot be applied the command does not run (exit 126 and a
line on stderr). Only the standard library and the sibling `landlock` module are imported.
"""

import os
import sys

#: The exit status when the sandbox cannot be applied (the shell's "cannot execute").
EXIT_CANNOT_SANDBOX = 126


def parse(args: list[str]) -> tuple[list[str], str, list[str]]:
    """(writable paths, executable, argv) from the launcher's own arguments."""
    writable: list[str] = []
    i = 0
    while i < len(args) and args[i] != "--":
        if args[i] != "--rw" or i + 1 >= len(args):
            raise ValueError(f"unexpected launcher argument {args[i]!r}")
        writable.append(args[i + 1])
        i += 2
    rest = args[i + 1 :]
    if len(rest) < 2:
        raise ValueError("no command after '--'")
    return writable, rest[0], rest[1:]


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import landlock  # type: ignore[import-not-found]  # the sibling (`-I` drops its folder)

    try:
        writable, executable, argv = parse(sys.argv[1:])
        landlock.restrict(writable)
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"[ai-sdlc] sandbox: cannot apply: {exc}; the command did not run\n")
        sys.stderr.flush()
        os._exit(EXIT_CANNOT_SANDBOX)
    try:
        os.execv(executable, argv)
    except OSError as exc:
        sys.stderr.write(f"[ai-sdlc] cannot run {argv[0]!r}: {exc.strerror or exc}\n")
        sys.stderr.flush()
        os._exit(127 if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_SANDBOX)


if __name__ == "__main__":
    main()
