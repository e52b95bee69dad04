"""Source text for stand-in commands that need the process that started them: with the
sandbox on, their parent is the sandbox launcher (which outlives them to kill what they leave
behind), and the caller is the launcher's parent."""

CALLER = """
def caller():
    # The process that started this command: the sandbox launcher says (in a PID namespace of
    # its own the command sees no pid outside it), else its parent, or the launcher's.
    given = os.environ.get("AI_SDLC_CALLER_PID")
    if given:
        return int(given)
    pid = os.getppid()
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            launched = b"launcher.py" in fh.read()
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1]) if launched else pid
    except OSError:
        return pid


def alive(pid):
    if os.environ.get("AI_SDLC_CALLER_PID") == str(pid) and not os.path.exists(f"/proc/{pid}"):
        return True  # out of sight in our PID namespace: our launcher ends us when it goes
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
"""
