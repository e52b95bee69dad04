"""A hostile agent / verify command / worktree setup step for tests/e2e/test_hostile_integrated.py:
`hostile_integrated.py ROLE PHASE ROOT REPORTS`, run in the story's worktree (its cwd).

MODE (the file REPORTS/mode, default `all`) says what it does:
  all       try every write the integrated sandbox must deny (the ledger and its copies in the
            user's state folder and the git ref, the config, the main checkout and its venv,
            moving the worktree away), from every role, and record one JSON line
            {role, phase, attack, outcome} per try in REPORTS/<role>.jsonl;
  dot-git   the agent rewrites the worktree's `.git` file to name the main checkout's top folder
            as its git folder (ai-sdlc's own, unsandboxed writes must not follow it);
  venv-pth  the agent breaks `add` and plants a `.pth` in the worktree's (git-ignored) venv that
            imports a shadow copy of the working code (verification must judge the diff);
  daemon    the agent adds mul.py and leaves a process in a session of its own that breaks `add`
            the moment verification has passed (before ai-sdlc commits the attempt);
  pyc       the agent breaks `add` and plants a `.pyc` of the working code in the git-ignored
            `src/calc/__pycache__`, with the broken source's mtime and size.
The verify role appends a line to REPORTS/verifications and fails (modes all and dot-git)."""

import glob
import json
import os
import subprocess
import sys
import time

role, phase, root, reports = sys.argv[1:5]
mode_file = os.path.join(reports, "mode")
mode = "all"
if os.path.exists(mode_file):
    with open(mode_file) as fh:
        mode = fh.read().strip()
working = phase in ("implement", "rework")
records = []


def attempt(name, action):
    try:
        action()
        outcome = "done"
    except OSError as exc:
        outcome = "denied: " + (exc.strerror or str(exc))
    records.append({"role": role, "phase": phase, "attack": name, "outcome": outcome})


def append(path, text="x\n"):
    def go():
        with open(path, "a") as fh:
            fh.write(text)

    return go


def git_ok(*args):
    def go():
        done = subprocess.run(["git", *args], capture_output=True, text=True)
        if done.returncode:
            raise PermissionError(13, "git failed: " + done.stderr.strip()[:100])

    return go


def state_home_write():
    """Lower the copy of the ledger head kept in the user's state folder (or plant a file)."""
    home = os.environ.get("AI_SDLC_STATE_HOME") or os.path.expanduser("~/.local/state/ai-sdlc")
    for folder, dirs, files in os.walk(home):
        if folder == home:  # the agents' own private homes and caches are theirs to write
            dirs[:] = [d for d in dirs if d not in ("homes", "caches")]
        for name in files:
            append(os.path.join(folder, name), '{"seq": 1, "total": 0}\n')()
            return
    os.makedirs(home, exist_ok=True)
    append(os.path.join(home, "planted"))()


def move_worktree():
    here = os.getcwd()
    os.rename(here, here + "-moved")
    os.rename(here + "-moved", here)


def break_add():
    init = os.path.join("src", "calc", "__init__.py")
    with open(init) as fh:
        text = fh.read()
    with open(init, "w") as fh:
        fh.write(text.replace("a + b", "a - b"))
    return text


def shadow_in_venv(good):
    site = glob.glob(".venv/lib/python*/site-packages")[0]
    shadow = os.path.abspath(os.path.join(".venv", "shadow"))
    os.makedirs(os.path.join(shadow, "calc"), exist_ok=True)
    with open(os.path.join(shadow, "calc", "__init__.py"), "w") as fh:
        fh.write(good)
    with open(os.path.join(site, "zz-shadow.pth"), "w") as fh:
        fh.write(f"import sys; sys.path.insert(0, {shadow!r})\n")


if mode == "all":
    main = os.path.join(root, ".ai-sdlc")
    attempt("write the user's state folder", state_home_write)
    attempt("git update-ref the ledger ref", git_ok("update-ref", "refs/ai-sdlc/ledger/x", "HEAD"))
    attempt("git update-ref a branch", git_ok("update-ref", "refs/heads/evil", "HEAD"))
    attempt("write the ledger", append(os.path.join(main, "state", "ledger", "S-0001.jsonl")))
    attempt("write config.yaml", append(os.path.join(main, "config.yaml"), "\n# x\n"))
    attempt("move the worktree away", move_worktree)
    attempt("write the main checkout", append(os.path.join(root, "src", "calc", "__init__.py")))
    attempt("write the main venv", append(os.path.join(root, ".venv", "pyvenv.cfg")))
    with open(os.path.join(reports, role + ".jsonl"), "a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in records))
if role == "agent" and working and mode == "all":
    append("work.txt", phase + "\n")()
elif role == "agent" and working and mode == "dot-git":
    append("work.txt", phase + "\n")()
    try:
        with open(".git", "w") as fh:
            fh.write(f"gitdir: {root}\n")
    except OSError as exc:  # read-only where the child has a mount namespace of its own
        with open(os.path.join(reports, "dot-git-refused"), "a") as fh:
            fh.write(f"{phase} {exc.errno}\n")
elif role == "agent" and working and mode == "pyc":
    import py_compile

    init = os.path.join("src", "calc", "__init__.py")
    stat = os.stat(init)
    cache = os.path.join("src", "calc", "__pycache__")
    tag = sys.implementation.cache_tag
    py_compile.compile(init, cfile=os.path.join(cache, f"__init__.{tag}.pyc"))
    break_add()
    os.utime(init, ns=(stat.st_atime_ns, stat.st_mtime_ns))
elif role == "agent" and working and mode == "daemon":
    with open(os.path.join("src", "calc", "mul.py"), "w") as fh:
        fh.write("def mul(a, b):\n    return a * b\n")
    daemon = (
        "import os, time\n"
        f"open({os.path.join(reports, 'daemon-pid')!r}, 'w').write(str(os.getpid()))\n"
        f"marker = {os.path.join(reports, 'verified')!r}\n"
        "while not os.path.exists(marker):\n"
        "    time.sleep(0.002)\n"
        "p = os.path.join('src', 'calc', '__init__.py')\n"
        "t = open(p).read(); open(p, 'w').write(t.replace('a + b', 'a - b'))\n"
        f"open({os.path.join(reports, 'daemon-done')!r}, 'w').write('x')\n"
    )
    started = subprocess.Popen(
        [sys.executable, "-c", daemon],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not os.path.exists(os.path.join(reports, "daemon-pid")):
        time.sleep(0.002)  # it runs: a handshake, not a time window
elif role == "agent" and working and mode == "venv-pth":
    shadow_in_venv(break_add())
if role == "agent":
    print(phase + " done\n\nDECISION: APPROVED" if phase in ("refine", "review") else "## " + phase)
elif role == "verify" and mode == "daemon":
    print("1 passed in 0.01s")
    if os.path.exists(os.path.join("src", "calc", "mul.py")):
        append(os.path.join(reports, "verified"), "x")()
elif role == "verify":
    append(os.path.join(reports, "verifications"), "verify\n")()
    print("FAILED tests/test_add.py::test_add - assert 1 == 5")
    sys.exit(1)
