"""Small CLI agents for the `command` provider tests; the first argument picks a behaviour.

  succeed                 print what it was asked (first prompt line), exit 0
  edit FILE TEXT          write TEXT to FILE in the workspace, exit 0
  hang PIDFILE            start a child, write both pids to PIDFILE, sleep 600 s (past any guard)
  ratelimit               print a rate-limit error on stderr, exit 1
  fail                    print an unclassifiable error, exit 3
  exitcode N              exit with code N
  report                  print JSON: argv, the prompt (file or stdin), whether stdin was closed
  phase PHASE STOP MARKER answer like a well-behaved agent in PHASE (write a file in implement
                          or rework, approve in refine and review); but when STOP names this
                          call (`implement`, or `implement@S-0002` for that story's prompt only)
                          and MARKER does not exist yet, write this process's pid to MARKER and
                          sleep 600 s, far past any timeout (a provider call to interrupt, once)
Options: --prompt-file F  read the prompt from F instead of stdin.
"""

from __future__ import annotations

# Only what every call needs: this program starts once per provider call (hundreds of times per
# suite), and json, subprocess and pathlib would triple its start-up; the modes that need one
# import it themselves.
import os
import sys
import time


def _prompt(argv: list[str]) -> tuple[str, bool]:
    """(prompt, stdin_was_closed_or_empty)."""
    if "--prompt-file" in argv:
        with open(argv[argv.index("--prompt-file") + 1], encoding="utf-8") as file:
            text = file.read()
        data = sys.stdin.read()
        return text, data == ""
    data = sys.stdin.read()
    return data, data == ""


def main() -> int:
    argv = sys.argv[1:]
    mode = argv[0]
    if mode == "hang":
        import json
        import subprocess

        sleep = "import time; time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", sleep, argv[1]])  # found by its argv
        _write(f"{argv[1]}.tmp", json.dumps([os.getpid(), child.pid]))
        os.replace(f"{argv[1]}.tmp", argv[1])  # whole, even if killed as it writes
        time.sleep(600)  # only a kill ends it (tests/support/waits.py NEVER)
        return 0
    prompt, stdin_empty = _prompt(argv)
    if mode == "phase":
        return _phase(*argv[1:4], prompt)
    if mode == "succeed":
        print(f"agent done: {prompt.splitlines()[0] if prompt else ''}")
        return 0
    if mode == "edit":
        _write(argv[1], argv[2])
        print(f"edited {argv[1]}")
        return 0
    if mode == "ratelimit":
        sys.stderr.write("Error: 429 Too Many Requests: rate limit exceeded, retry later\n")
        return 1
    if mode == "fail":
        sys.stderr.write("segmentation fault in the frobnicator\n")
        return 3
    if mode == "exitcode":
        return int(argv[1])
    if mode == "report":
        import json

        print(
            json.dumps(
                {"argv": argv, "prompt": prompt, "stdin_empty": stdin_empty, "cwd": os.getcwd()}
            )
        )
        return 0
    sys.stderr.write(f"unknown mode {mode}\n")
    return 2


def _phase(phase: str, stop: str, marker: str, prompt: str) -> int:
    stop_phase, _, story = stop.partition("@")
    named = phase == stop_phase and (not story or f"# Story {story}:" in prompt)
    if named and not os.path.exists(marker):
        _write(f"{marker}.tmp", str(os.getpid()))
        os.replace(f"{marker}.tmp", marker)  # the pid appears whole, once this process runs
        time.sleep(600)  # far past the test's guard: only a kill ends it in time
        return 0
    if phase in ("implement", "rework"):
        done = "implemented.txt"
        count = len(_read(done).splitlines()) if os.path.exists(done) else 0
        _write(done, "".join(f"change {i}\n" for i in range(count + 1)))
        print(f"implemented change {count}")
    elif phase in ("refine", "review"):
        print(f"{phase} done: looks right\n\nDECISION: APPROVED")
    else:
        print(f"## {phase.capitalize()}\n\nnothing surprising")
    return 0


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


if __name__ == "__main__":
    sys.exit(main())
