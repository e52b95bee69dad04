"""The workflow: everything that moves stories through their phases.

Packages by responsibility, bottom up: `state` (the one owner of story state: transitions,
ledger and its mirrors, the recovery guard, checkpoints, events, run locks), `engine` (one story
through its phases), `runs` (multi-story runs, their graph and stop conditions), `parallel`
(the local and Ray executors). `session` is the composition root that wires them for the CLI
(helped by `wiring`); `dryrun` is what `run --dry-run` shows; `watch` polls the backlog and
starts runs.
"""
