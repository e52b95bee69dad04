"""Each story worktree's own environment: setup commands run when it is created, the layered
Python venv recipe, the wrong-tree guard, and the setup `init` proposes."""
