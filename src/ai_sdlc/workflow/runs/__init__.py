"""Multi-story runs: `multirun.MultiRun` walks the backlog in dependency order (`graph`), keeps
its resumable record (`runstate`), and stops on the run-wide conditions (`stopconditions`,
`loops`, `cooldown`), telling the user when it does (`notify`). `conflicts` keeps parallel
siblings off each other's files."""
