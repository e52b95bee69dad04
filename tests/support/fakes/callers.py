"""Source text for stand-in commands that need the process that started them: with the
sandbox on, their parent is the sandbox launcher (which outlives them to kill what they leave
behind), and the caller is the launcher's parent."""

CALLER = """
def caller():
    # The process that started this command: its parent, or the sandbox launcher's.
    pid = os.getppid()
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            launched = b"launcher.py" in fh.read()
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1]) if launched else pid
    except OSError:
        return pid


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
"""
