"""ai-sdlc: take markdown stories through refine → research → plan → implement → review with AI
agents, and stop runaway recovery loops before they burn hours and API quota."""

__version__ = "0.1.0"
