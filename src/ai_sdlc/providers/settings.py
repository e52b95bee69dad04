"""The `ai.<provider>.*` settings each provider reads, one model per provider.

A leaf module: it imports only msgspec and `settingkey`, so `config` can validate
these keys without importing any provider (and the providers import nothing from `config`).
The names here are the one source: `PROVIDER_NAMES` (registry), `PRESET_NAMES`
(`command_presets.PRESETS`), `OUTPUT_FORMATS` (`cli_output`).
"""

from typing import Annotated, Any, Literal

import msgspec

from ai_sdlc.settingkey import key

#: Every provider `ai.provider` may name, in the order `doctor` lists them.
PROVIDER_NAMES: tuple[str, ...] = (
    "scripted",
    "dry-run",
    "openai",
    "anthropic",
    "claude",
    "command",
)
ProviderName = Literal["scripted", "dry-run", "openai", "anthropic", "claude", "command"]
#: The documented `ai.command.preset` templates (`command_presets.PRESETS`).
PRESET_NAMES: tuple[str, ...] = ("claude", "codex", "aider", "gemini")
PresetName = Literal["claude", "codex", "aider", "gemini"]
#: How a CLI agent's stdout is read (`cli_output.parse_output`).
OUTPUT_FORMATS: tuple[str, ...] = (
    "text",
    "codex-jsonl",
    "gemini-json",
    "aider",
    "gemini-jsonl",
    "claude-json",
)
OutputFormat = Literal["text", "codex-jsonl", "gemini-json", "aider", "gemini-jsonl", "claude-json"]

_Model = Annotated[str | None, key("model for this provider (over `ai.model`)")]
_Argv = Annotated[list[str], msgspec.Meta(min_length=1)]


class ApiSettings(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """`ai.openai` / `ai.anthropic`: an HTTP API reached with a key from the environment."""

    base_url: Annotated[
        str | None,
        key(
            "API endpoint (e.g. a local server); null: the provider's default",
            check="http_url",
            expected="an http:// or https:// URL or null",
        ),
    ] = None
    api_key_env: Annotated[
        str | None,
        key(
            "the environment variable that holds the key (keys never go in a file)",
            check="env_name",
            expected="the name of an environment variable, e.g. OPENAI_API_KEY",
        ),
    ] = None
    model: _Model = None
    stream: Annotated[bool | None, key("stream answers as they are written")] = True


class ClaudeSettings(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """`ai.claude`: Claude Code driven through its stream of events."""

    binary: Annotated[
        str | None,
        key("the `claude` executable (name or path); null: PATH, then the bundled one"),
    ] = None
    model: _Model = None
    max_retries: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        key("Claude Code's own API retries (counted as recoveries); null: its default"),
    ] = None
    extra_args: Annotated[
        _Argv | None, key("more arguments for `claude`", expected="a list of arguments")
    ] = None


class CommandSettings(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """`ai.command`: any CLI agent from an argument-list template (see `command_provider`)."""

    preset: Annotated[
        PresetName | None, key("a documented template: claude, codex, aider or gemini")
    ] = None
    template: Annotated[
        _Argv | None,
        key(
            "argument list; placeholders {prompt_file} {workspace} {model} {phase}",
            expected="a non-empty argument list",
        ),
    ] = None
    read_only_template: Annotated[
        _Argv | None,
        key(
            "argument list for refine/research/plan/review; null: `template`",
            expected="a non-empty argument list",
        ),
    ] = None
    prompt_via: Annotated[
        Literal["file", "stdin"] | None,
        key("how the prompt reaches the agent; null: file when a token has {prompt_file}"),
    ] = None
    output: Annotated[
        OutputFormat | None, key("how stdout is read; null: the preset's, else text")
    ] = None
    patterns: Annotated[
        list[Any] | None,
        key(
            "output patterns mapped to error kinds, checked before the defaults",
            expected="a list of {pattern, kind}",
            type_name="list[{pattern, kind}] | null",
        ),
    ] = None
    exit_codes: Annotated[
        dict[Any, Any] | None,
        key(
            "exit code -> error kind",
            expected="a mapping exit code -> kind",
            type_name="dict[int, str] | null",
        ),
    ] = None
    model: _Model = None


#: Section name under `ai` → the model of that provider's settings.
PROVIDER_SETTINGS: dict[str, type[msgspec.Struct]] = {
    "openai": ApiSettings,
    "anthropic": ApiSettings,
    "claude": ClaudeSettings,
    "command": CommandSettings,
}
