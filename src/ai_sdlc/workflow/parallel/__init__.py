"""Parallel execution of a multi-story run: `scheduler.ParallelRun` decides what may start,
an executor runs it: `executors.LocalExecutor` (worker processes on this machine) or
`ray_executor` with `ray_worker` (a Ray cluster, each story in its own clone)."""
