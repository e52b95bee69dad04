"""Verification: run the project's build/test commands, compare failures, fingerprint work."""

from ai_sdlc.fingerprint import EXCLUDED_DIRS, workspace_fingerprint
from ai_sdlc.verify.commands import (
    SECRET_ENV_VARS,
    StepResult,
    VerificationResult,
    default_environment,
    parse_commands,
    run_commands,
    run_step,
    verify_environment,
)
from ai_sdlc.verify.normalise import failure_signature, normalise_failure, summarise_failure

__all__ = [
    "EXCLUDED_DIRS",
    "SECRET_ENV_VARS",
    "StepResult",
    "VerificationResult",
    "default_environment",
    "failure_signature",
    "normalise_failure",
    "parse_commands",
    "run_commands",
    "run_step",
    "summarise_failure",
    "verify_environment",
    "workspace_fingerprint",
]
