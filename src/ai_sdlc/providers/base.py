"""The provider seam: one request type, one result type, one `execute` method, typed errors.

Every backend (scripted, dry-run, openai, anthropic, claude, command) implements `Provider`.
Retrying is never a provider's business: providers raise `TransientProviderError` and the
resilience layer decides, so every retry is ours and counted on the story.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import msgspec

# The provider errors live on the base floor (resilience classifies them without importing
# providers); they are part of this seam and importable from here.
from ai_sdlc.errors import (
    TRANSIENT_KINDS as TRANSIENT_KINDS,
)
from ai_sdlc.errors import (
    AgentReportedError as AgentReportedError,
)
from ai_sdlc.errors import (
    ProviderAuthError as ProviderAuthError,
)
from ai_sdlc.errors import (
    ProviderConfigError as ProviderConfigError,
)
from ai_sdlc.errors import (
    ProviderError as ProviderError,
)
from ai_sdlc.errors import (
    ProviderLimitError as ProviderLimitError,
)
from ai_sdlc.errors import (
    ProviderRequestError as ProviderRequestError,
)
from ai_sdlc.errors import (
    TransientProviderError as TransientProviderError,
)
from ai_sdlc.sandbox.policy import SandboxPolicy


class Phase(StrEnum):
    REFINE = "refine"
    RESEARCH = "research"
    PLAN = "plan"
    IMPLEMENT = "implement"
    REVIEW = "review"
    REWORK = "rework"


class Access(StrEnum):
    READ_ONLY = "read-only"
    EDIT = "edit"


#: Phases that may change files in the workspace; every other phase is read-only.
EDIT_PHASES = frozenset({Phase.IMPLEMENT, Phase.REWORK})


def access_for(phase: Phase) -> Access:
    return Access.EDIT if phase in EDIT_PHASES else Access.READ_ONLY


#: Called by a provider for things worth showing live or logging (tool calls, streamed
#: events). `name` is a short event name, `data` JSON-serialisable.
EventSink = Callable[[str, dict[str, Any]], None]

#: Called by a provider whose backend retried an API call by itself (e.g. the `claude` CLI
#: reports `api_retry` events) with (delay_seconds, reason). It records the retry as an
#: `api_retry` recovery attempt and raises `StoryBlockedError` when the global limit is
#: reached, which the provider must let propagate after stopping its backend.
RetryReporter = Callable[[float, str], None]


T = TypeVar("T")


class CallGuard(Protocol):
    """Runs ONE backend API call (or one CLI-agent invocation) under the `llm` resilience policy.

    The runner supplies it: it retries transient errors with backoff, records every retry as an
    `api_retry` recovery attempt on the story, and raises `StoryBlockedError` when the global
    limit is reached. Providers must route every call through it and never retry themselves.
    """

    def __call__(self, fn: Callable[[], T], /) -> T: ...


def direct_call(fn: Callable[[], T], /) -> T:
    """The guard used when none is given (unit tests of a provider alone): no retry."""
    return fn()


class ProviderRequest(msgspec.Struct, frozen=True):
    """Everything a provider needs for one phase call; built by the runner, never by a provider."""

    phase: Phase
    prompt: str
    system_prompt: str
    workspace: Path
    access: Access
    timeout: float
    story_id: str
    #: 1-based count of calls of this phase for this story (scripted rules match on it).
    attempt: int = 1
    model: str | None = None
    #: Structured facts for the agent beyond the prompt, e.g. for review:
    #: {"verification_passed": bool, "workspace_changed": bool, "verification_output": str}.
    context: Mapping[str, Any] = msgspec.field(default_factory=dict)
    guard: CallGuard = direct_call
    on_event: EventSink | None = None
    on_backend_retry: RetryReporter | None = None
    #: Confines every process the provider starts for this call (None: unconfined; the
    #: runner sets it from the session's sandbox, see `ai_sdlc.sandbox`).
    sandbox: SandboxPolicy | None = None


class Usage(msgspec.Struct):
    """Tokens and cost of one call, summed into the story's usage."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd


class ProviderResult(msgspec.Struct):
    """What a provider returns for one phase: the agent's text, usage and the files it wrote."""

    text: str
    usage: Usage = msgspec.field(default_factory=Usage)
    duration: float = 0.0
    #: Relative paths the provider wrote in the workspace (informational).
    files_changed: list[str] = msgspec.field(default_factory=list)


# --- the base class -----------------------------------------------------------------------


class ProviderStatus(msgspec.Struct):
    """What `ai-sdlc doctor` says of a provider."""

    name: str
    usable: bool
    reason: str


class Provider(abc.ABC):
    """One backend. Subclasses set `name` and implement `execute`."""

    name: ClassVar[str]
    #: True for the offline/simulated providers, so output can say that no AI was involved.
    simulated: ClassVar[bool] = False

    @abc.abstractmethod
    def execute(self, request: ProviderRequest) -> ProviderResult:
        """Run one agent phase. Raise a `ProviderError` subclass on failure, never retry."""

    def status(self) -> ProviderStatus:
        return ProviderStatus(self.name, True, "built in")


class ConfiguredProvider(Provider):
    """A real backend: configured from the `ai` config section (`settings`) and the
    environment (keys are only ever read from there), working for one project."""

    def __init__(
        self,
        project_root: Path,
        settings: Mapping[str, Any],
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.project_root = project_root
        self.settings = settings
        self.environ = os.environ if environ is None else environ
        own = settings.get(self.name)
        #: This provider's own sub-section, e.g. `ai.openai`.
        self.own: Mapping[str, Any] = own if isinstance(own, Mapping) else {}
