"""`.ai-sdlc/config.yaml`: typed section models, layered loading, checks with file:line errors,
and comment-preserving edits for `ai-sdlc config KEY VALUE`.

The effective config is a plain nested dict: defaults (from the models in `sections`) ⊕ the
user's file (the platform's config folder, or `$AI_SDLC_CONFIG_HOME/config.yaml`) ⊕ the
project's file ⊕ the environment, each later layer winning (`layers`). Both files get the same
checks (`validate`); neither may hold a secret (`secrets`), and neither the user's file nor the
environment may loosen a guardrail. Guardrail settings changed by hand wait for a person's
`config --accept` (`guard`, imported on its own). Each provider's `ai.<provider>` model lives in
`providers.settings`; `resilience` is checked by `config.resilience`. `docs/configuration.md`
is generated from the models: `python -m ai_sdlc.config.docs`.

Modules: fields (how a key is declared), sections (the models), keys (the flat key table),
files (reading), validate, secrets, effective (the `Config` object), layers (loading), editing
(`set_value`), yamledit (edits through `store.splice`), text (the file `init` writes), guard, docs.
"""

from __future__ import annotations

from ai_sdlc.config.editing import get_value, set_value, typed_value, write_default_config
from ai_sdlc.config.effective import Config, defaults
from ai_sdlc.config.fields import MAX_RECOVERY, MAX_SECONDS, Setting, is_http_url
from ai_sdlc.config.files import (
    CONFIG_RELPATH,
    USER_CONFIG_ENV,
    user_config_dir,
    user_config_path,
)
from ai_sdlc.config.keys import (
    ENV_PREFIX,
    GUARDRAILS,
    OPEN_SECTIONS,
    PROVIDER_CHOICES,
    SCHEMA,
    SECTIONS,
)
from ai_sdlc.config.layers import file_settings, load_config, parse_scalar
from ai_sdlc.config.secrets import mask_setting, names_secret
from ai_sdlc.config.sections import Settings
from ai_sdlc.config.text import DEFAULT_CONFIG_TEXT, DEFAULT_SETUP_LINE
from ai_sdlc.config.validate import validate

__all__ = [
    "CONFIG_RELPATH",
    "DEFAULT_CONFIG_TEXT",
    "DEFAULT_SETUP_LINE",
    "ENV_PREFIX",
    "GUARDRAILS",
    "MAX_RECOVERY",
    "MAX_SECONDS",
    "OPEN_SECTIONS",
    "PROVIDER_CHOICES",
    "SCHEMA",
    "SECTIONS",
    "USER_CONFIG_ENV",
    "Config",
    "Setting",
    "Settings",
    "defaults",
    "file_settings",
    "get_value",
    "is_http_url",
    "load_config",
    "mask_setting",
    "names_secret",
    "parse_scalar",
    "set_value",
    "typed_value",
    "user_config_dir",
    "user_config_path",
    "validate",
    "write_default_config",
]
