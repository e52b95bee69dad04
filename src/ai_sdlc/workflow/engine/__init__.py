"""One story through its phases: `runner.StoryRunner` picks the next phase (`assess`), builds
the agent's prompt (`agents`), calls the provider, looks for real work (`work`), has it judged
and committed through the `workspace` seam, and asks the state owner to record each step."""
