"""The real agent CLIs (Claude Code, Codex, Gemini CLI, Aider), installed once from their
registries into a cache folder and driven against fake model servers bound to 127.0.0.1."""
