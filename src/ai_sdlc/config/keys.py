"""The flat key table read from the models: `SCHEMA` (every dotted key), the sections, and the
guardrails that only a reviewed project file may loosen."""

from __future__ import annotations

from ai_sdlc.config.fields import MAX_RECOVERY, MAX_SECONDS, Setting, sections_of, settings_of
from ai_sdlc.config.sections import Settings
from ai_sdlc.providers.settings import PROVIDER_NAMES

__all__ = ["MAX_RECOVERY", "MAX_SECONDS", "PROVIDER_CHOICES", "Setting"]

ENV_PREFIX = "AI_SDLC_"

#: The providers `ai.provider` may name (one source: `providers.settings.PROVIDER_NAMES`).
PROVIDER_CHOICES = PROVIDER_NAMES

#: Every key of the models, dotted, with its default, check and meaning.
SCHEMA: dict[str, Setting] = settings_of(Settings)

#: Dotted names of every section and sub-section (`run`, `run.stop_conditions`, `ai.openai`...).
SECTIONS: tuple[str, ...] = tuple(sections_of(Settings))

#: Sections that may be written as null (a provider's section left empty).
NULLABLE_SECTIONS = frozenset(s for s in SECTIONS if s.startswith("ai."))

#: Sections whose inner keys are validated by their own model as a whole (`config.resilience`).
OPEN_SECTIONS = ("resilience",)

#: Settings an environment variable may make stricter but never looser: the recovery limits, the
#: phase timeout and the budgets (lower is stricter; null means no budget), the stage gates and
#: the sandbox switches (true is stricter), the list guardrails (`sandbox.writable`,
#: `sandbox.network`, `sandbox.pass_env`, `pr.trusted_bots`: fewer entries is stricter;
#: `sandbox.deny_read`: more is stricter; `layers._widened`). A
#: cloned repository or a CI variable must not switch a guardrail off. Marked `guard="strict"`
#: on the models (`sections`).
GUARDRAILS: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if s.guard == "strict")

#: Keys whose change waits for a person's `config --accept` (`config.guard`): the guardrails and
#: everything else marked `guard="accept"` (verify, sandbox, worktree, git.worktrees).
GUARDED: tuple[str, ...] = tuple(k for k, s in SCHEMA.items() if s.guard)
