"""The `command` provider's presets: the documented command lines of Claude Code, Codex, Aider
and Gemini CLI, each with how its output is read, and the note on Codex's uncounted retries.

Kept apart from the provider's run loop so a CLI's flags can change without touching how an
agent is run, confined and read.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ai_sdlc.providers.cli_output import AIDER_ANALYTICS, AIDER_HISTORY
from ai_sdlc.sandbox.childenv import AI_KEYS, CLAUDE_KEYS

PLACEHOLDERS = ("{prompt_file}", "{workspace}", "{model}", "{phase}", "{output_dir}")
#: The providers' own API hosts (logins included: Codex's ChatGPT sign-in, Gemini's OAuth).
CLAUDE_HOSTS = ("api.anthropic.com",)
OPENAI_HOSTS = ("api.openai.com", "chatgpt.com", "auth.openai.com")
GEMINI_HOSTS = ("generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com",
                "oauth2.googleapis.com")  # fmt: skip
#: Every provider's, for an agent template of the user's own (its provider is not known).
ALL_HOSTS = (*CLAUDE_HOSTS, *OPENAI_HOSTS, *GEMINI_HOSTS)
#: Variables that point a CLI at another endpoint (a gateway, a local server): their hosts
#: are allowed too.
BASE_URL_VARS = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE",
                 "GOOGLE_GEMINI_BASE_URL", "GEMINI_BASE_URL")  # fmt: skip


@dataclass(frozen=True)
class Preset:
    template: tuple[str, ...]
    read_only_template: tuple[str, ...]
    prompt_via: str
    doc: str
    #: How stdout is read (`cli_output.OUTPUT_FORMATS`).
    output: str = "text"
    #: (name, text) written into the private `{output_dir}` before each run.
    files: tuple[tuple[str, str], ...] = ()
    #: Read stderr as part of stdout, as it comes (a CLI that logs its retries there).
    merge_stderr: bool = False
    #: The edit phases' command line when ai-sdlc's own sandbox confines the agent (an agent
    #: whose own sandbox cannot start inside ours).
    confined_template: tuple[str, ...] | None = None
    #: The credential variables the CLI logs in with (the only ones it gets when sandboxed,
    #: with `sandbox.pass_env`).
    keys: tuple[str, ...] = AI_KEYS
    #: The API hosts it may reach through the egress proxy (`sandbox/proxy.py`), besides those
    #: its base-URL variables name (`BASE_URL_VARS`).
    hosts: tuple[str, ...] = ()


def _codex(sandbox: str) -> tuple[str, ...]:
    return (
        "codex",
        "exec",
        "--json",
        "--sandbox",
        sandbox,
        "--skip-git-repo-check",
        "--model={model}",
        "-",
    )


#: Aider, headless: no prompts, no update checks, no browser, no analytics sent; the answer and
#: usage go to files in the private output folder (cli_output.AIDER_*), which lies inside the
#: sandbox's writable set (the private home's `runs/`). `--no-git`: Aider `git add`s each file
#: it creates, and a sandboxed child cannot write the repository's index (the git folder is
#: read-only), so every new file ended empty; ai-sdlc owns git (staging, commits) anyway.
_AIDER = (
    "aider",
    "--message-file",
    "{prompt_file}",
    "--yes-always",
    "--no-git",
    "--no-auto-commits",
    "--no-gitignore",
    "--no-pretty",
    "--no-stream",
    "--no-fancy-input",
    "--no-show-model-warnings",
    "--no-show-release-notes",
    "--no-check-update",
    "--no-detect-urls",
    "--no-suggest-shell-commands",
    "--no-analytics",
    "--analytics-log={output_dir}/" + AIDER_ANALYTICS,
    "--llm-history-file={output_dir}/" + AIDER_HISTORY,
    "--chat-history-file={output_dir}/chat-history.md",
    "--input-history-file={output_dir}/input-history.txt",
    "--model-settings-file={output_dir}/model-settings.yml",
)
#: `aider/extra_params` apply to every model: no retries inside litellm (the OpenAI client's
#: two, which Aider never shows), so each retry is one Aider prints and ai-sdlc counts.
_AIDER_SETTINGS = "- name: aider/extra_params\n  extra_params:\n    max_retries: 0\n"

PRESETS: dict[str, Preset] = {
    "claude": Preset(
        # Claude Code 2.1's own tool names only (an unknown one is dropped silently): the
        # implement phase is never offered Task/Agent, Cron*, EnterWorktree, SendMessage & co.
        template=(
            "claude",
            "-p",
            "--output-format",
            "json",
            "--permission-mode",
            "acceptEdits",
            "--tools",
            "Read,Glob,Grep,Write,Edit,NotebookEdit",
            "--disallowedTools",
            "Bash,WebFetch,WebSearch,Task",
            "--model={model}",
        ),
        read_only_template=(
            "claude",
            "-p",
            "--output-format",
            "json",
            "--tools",
            "Read,Glob,Grep",
            "--disallowedTools",
            "Write,Edit,NotebookEdit,Bash,WebFetch,WebSearch,Task",
            "--model={model}",
        ),
        prompt_via="stdin",
        doc="Claude Code, `--output-format json` (answer, token usage and errors from its "
        "`result`; the `claude` provider streams events instead)",
        output="claude-json",
        keys=CLAUDE_KEYS,
        hosts=CLAUDE_HOSTS,
    ),
    "codex": Preset(
        template=_codex("workspace-write"),
        read_only_template=_codex("read-only"),
        prompt_via="stdin",
        doc="OpenAI Codex CLI, `exec --json` events (answer, token usage, its own "
        "`Reconnecting... n/m` retries, `turn.failed`); the prompt is read from stdin, which "
        "is then closed; `--sandbox read-only` for read-only phases",
        output="codex-jsonl",
        # Codex's own sandbox (bubblewrap) cannot set up its user namespace inside ai-sdlc's
        # Landlock sandbox ("bwrap: setting up uid map: Permission denied"), so every command
        # it ran failed. Confined by ours (writes: the worktree, a private temp folder, tool
        # state), an edit phase turns Codex's off; a read-only phase keeps `read-only`, under
        # which its commands cannot run at all: nothing is written.
        confined_template=_codex("danger-full-access"),
        keys=("OPENAI_API_KEY", "CODEX_API_KEY"),
        hosts=OPENAI_HOSTS,
    ),
    "aider": Preset(
        template=(*_AIDER, "--model={model}"),
        read_only_template=(*_AIDER, "--dry-run", "--model={model}"),
        prompt_via="file",
        # --no-gitignore: with --yes-always aider would otherwise add `.aider*` (and `.env`)
        # to the project's .gitignore, a change nobody asked for (and a read-only violation).
        # Its console is never the answer: the answer is read from its LLM history, the usage
        # from its analytics log (both in the private output folder). Its model settings turn
        # off litellm's own hidden retries, so each retry is Aider's printed one (counted).
        doc="Aider; --dry-run for read-only phases, no commits and no .gitignore edits "
        "(the runner owns git); answer, usage and retries read from its history, analytics "
        "log and output lines; an API failure is a failure although Aider exits 0",
        output="aider",
        files=(("model-settings.yml", _AIDER_SETTINGS),),
        hosts=(*OPENAI_HOSTS[:1], *CLAUDE_HOSTS, *GEMINI_HOSTS[:1]),
    ),
    "gemini": Preset(
        template=(
            "gemini",
            "--output-format",
            "stream-json",
            "--approval-mode",
            "auto_edit",
            "--model={model}",
        ),
        read_only_template=(
            "gemini",
            "--output-format",
            "stream-json",
            "--approval-mode",
            "default",
            "--model={model}",
        ),
        prompt_via="stdin",
        # Piped stdin alone makes Gemini CLI headless and is the whole prompt (`-p` text would
        # only be appended to it). Headless, every tool call that would ask for approval is
        # denied: `default` leaves read tools only, `auto_edit` adds the edit tools (never the
        # shell). An untrusted folder (security.folderTrust) fails with exit code 55 and says
        # how to trust it; we never pass --skip-trust on the user's behalf.
        # Its retries are log lines on stderr, so stderr is read with stdout as it comes:
        # each is counted at once, and the global limit can stop it mid-way.
        doc="Gemini CLI, `--output-format stream-json` with stderr merged in (answer, token "
        "usage, its own API retries as they happen, typed errors); prompt on stdin; "
        "`--approval-mode default` for read-only phases (headless: edits denied), `auto_edit` "
        "for edit phases",
        output="gemini-jsonl",
        merge_stderr=True,
        keys=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),
        hosts=GEMINI_HOSTS,
    ),
}


def codex_retry_note(environ: Mapping[str, str]) -> str | None:
    """Codex retries a refused API request by itself (4 times by default) and never says so in
    `exec --json`, so those retries cannot be counted. Under the sandbox Codex runs on a private
    copy of the user's config.toml with `request_max_retries = 0` on every provider of the
    user's own (`sandbox.codexconf`): each failure comes back to ai-sdlc's `llm` policy, which
    retries and counts it. The built-in `openai` provider cannot be changed (codex refuses to
    load such a config)."""
    data = _codex_config(environ)
    provider = str(data.get("model_provider") or "openai")
    providers = data.get("model_providers")
    info = providers.get(provider) if isinstance(providers, dict) else None
    if isinstance(info, dict):
        return None
    return (
        f"codex retries refused API requests by itself (model provider {provider!r}) and does "
        "not report them, so they are not counted; to count each, use a model provider of your "
        "own in codex's config.toml (ai-sdlc turns its retries off in its private copy)"
    )


def api_urls(hosts: tuple[str, ...], environ: Mapping[str, str]) -> list[str]:
    """What an agent may reach through the egress proxy: its provider's `hosts`, the URLs of
    the base-URL variables set in `environ`, and the `base_url` of every model provider in
    Codex's `config.toml` (a local or company endpoint)."""
    urls = [*hosts, *(environ[name] for name in BASE_URL_VARS if environ.get(name))]
    providers = _codex_config(environ).get("model_providers")
    if isinstance(providers, dict):
        urls += [str(p["base_url"]) for p in providers.values()
                 if isinstance(p, dict) and p.get("base_url")]  # fmt: skip
    return urls


def codex_keys(environ: Mapping[str, str]) -> list[str]:
    """The `env_key` of every model provider in Codex's `config.toml`: the variable that holds
    the key of a provider of the user's own (it is that agent's key, passed on)."""
    providers = _codex_config(environ).get("model_providers")
    if not isinstance(providers, dict):
        return []
    return [str(p["env_key"]) for p in providers.values()
            if isinstance(p, dict) and p.get("env_key")]  # fmt: skip


def _codex_config(environ: Mapping[str, str]) -> dict[str, object]:
    default = Path(environ.get("HOME") or "~").expanduser() / ".codex"
    home = environ.get("CODEX_HOME") or str(default)
    try:
        return tomllib.loads((Path(home) / "config.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
