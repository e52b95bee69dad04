"""Agent providers behind one seam (`base.Provider`), built by name through the registry.

Importing this package stays cheap: provider modules and their client libraries load only
when `create_provider` asks for one.
"""

from ai_sdlc.providers.base import (
    Access,
    Phase,
    Provider,
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderLimitError,
    ProviderRequest,
    ProviderRequestError,
    ProviderResult,
    ProviderStatus,
    TransientProviderError,
    Usage,
    access_for,
)
from ai_sdlc.providers.decision import parse_decision, split_decision
from ai_sdlc.providers.registry import PROVIDER_NAMES, create_provider, provider_class

__all__ = [
    "PROVIDER_NAMES",
    "Access",
    "Phase",
    "Provider",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderError",
    "ProviderLimitError",
    "ProviderRequest",
    "ProviderRequestError",
    "ProviderResult",
    "ProviderStatus",
    "TransientProviderError",
    "Usage",
    "access_for",
    "create_provider",
    "parse_decision",
    "provider_class",
    "split_decision",
]
