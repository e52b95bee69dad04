"""One story through its phases: `runner.StoryRunner` picks the next phase (`assess`), builds
the agent's prompt (`agents`), calls the provider, looks for real work (`work`), has it judged
and committed through the `workspace` seam, and asks the state owner to record each step.

`StoryRunner` is one class built in layers, a module each: `base` (settings, dependencies,
shared moves), `calls` (the agent call, budgets, usage), `judging` (verification and the
judge), `phases` (refine, research, plan, implement), `review` (review and publishing) and
`runner` (the phase loop, checkpointed execution)."""
