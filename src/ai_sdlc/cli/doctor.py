"""`ai-sdlc doctor`: first a pre-flight checklist (`ai_sdlc.preflight`: git, the remote, the base
branch, `gh` and its login, each verify command's program, the sandbox; then the provider, the
verification environment and nested projects), one ✓/✗/⚠ line each with its fix; then which
agent providers are usable here and why not, and the effective config (every key with its
value and where it comes from: default, user file, project file or environment), without ever
printing a secret (keys show as "set" or "not set", never their value).
A provider whose client library does not import is unusable, with the install command: the
same test auto-detection uses, so a run never picks what doctor calls unusable. Only the selected
provider's library is imported (a second or more each); the others are reported from the
installed distribution's files and version (`registry.package_versions`).

It also says whether verification in a story worktree would judge the worktree's code (the
wrong-tree guard, see `worktree_env`), and the fix when it would not.

Exits 4 (provider unavailable) when the provider a run would use cannot be used, else 3 when
config.yaml is invalid or verification would test the main checkout's code (the report is still
printed, with the file, line and reason, or the fix), else 1 when any other checklist item a
run needs fails.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import typer

from ai_sdlc.cli.application import Application
from ai_sdlc.cli.options import JsonOption
from ai_sdlc.errors import AiSdlcError, ExitCode, ProviderUnavailableError
from ai_sdlc.preflight import ADVISORY, ERROR, Item, checklist

_SECRET_KEY = re.compile(r"key|token|secret|password|passwd|credential", re.IGNORECASE)
_ENV_SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
_ENV_PLAIN = (
    "AI_SDLC_PROVIDER",
    "AI_SDLC_MODEL",
    "AI_SDLC_SANDBOX",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
)
_BUILT_IN = {
    "scripted": "built in: offline, simulated answers (no AI involved)",
    "dry-run": "built in: prints prompts, calls nothing",
}


def _safe_url(value: str) -> str:
    """`value` with URL userinfo and credential-looking query parameters masked."""
    from ai_sdlc.secrets import mask_url, redact

    return redact(mask_url(value))


def redact_config(value: Any, key: str = "") -> Any:
    """The config with every secret-looking value masked."""
    from ai_sdlc.providers.errors_map import redact

    if isinstance(value, Mapping):
        return {str(k): redact_config(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_config(v, key) for v in value]
    if isinstance(value, str):
        if _SECRET_KEY.search(key) and not key.endswith("_env"):
            return "***"
        if "://" in value:
            return _safe_url(value)
        return redact(value)
    return value


def _statuses(
    root: Path, settings: Mapping[str, Any], which: Callable[[str], str | None], selected: str
) -> list[dict[str, Any]]:
    from ai_sdlc.providers.anthropic_provider import AnthropicProvider
    from ai_sdlc.providers.base import Provider
    from ai_sdlc.providers.claude_provider import ClaudeProvider
    from ai_sdlc.providers.command_provider import CommandProvider
    from ai_sdlc.providers.openai_provider import OpenAIProvider
    from ai_sdlc.secrets import redact

    rows = [{"name": name, "usable": True, "reason": why} for name, why in _BUILT_IN.items()]
    classes: list[type[Provider]] = [
        OpenAIProvider,
        AnthropicProvider,
        ClaudeProvider,
        CommandProvider,
    ]
    from ai_sdlc.providers.registry import (
        install_hint,
        missing_package,
        package_versions,
        provider_spec,
    )

    for cls in classes:
        factory: Any = cls
        module, versions = package_versions(cls.name)
        if module is None and cls.name == selected:
            module = missing_package(cls.name)  # a run would import it: so does doctor
        if module is not None:
            hint = install_hint(provider_spec(cls.name))
            reason = f"the {module} package is not installed: {hint}"
            rows.append({"name": cls.name, "usable": False, "reason": reason})
            continue
        try:
            extra = {"which": which} if cls is ClaudeProvider else {}
            status = factory(root, settings, **extra).status()
            reason = redact(status.reason)
            row = {"name": status.name, "usable": status.usable, "reason": reason}
            if versions:
                row["packages"] = versions
            rows.append(row)
        except AiSdlcError as exc:
            rows.append({"name": cls.name, "usable": False, "reason": redact(exc.message)})
    return rows


def build_report(
    root: Path,
    environ: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> dict[str, Any]:
    """Everything `doctor` prints, as plain data (secrets already masked)."""
    from ai_sdlc.config import load_config
    from ai_sdlc.providers.selection import (
        NO_AI_FIX,
        NO_PROVIDER,
        choose_provider_name,
        resolve_model,
    )

    env = os.environ if environ is None else environ
    from ai_sdlc.config import CONFIG_RELPATH, user_config_path

    problems: list[str] = []
    config_invalid = False
    effective: dict[str, Any] = {}
    sandbox: dict[str, Any] = {}
    worktree_env: dict[str, Any] | None = None
    checks: list[Item] = []
    try:
        config = load_config(root, environ=env)
        settings: dict[str, Any] = config.section("ai")
        limits = config.section("limits")
        effective = config.effective()
        sandbox = sandbox_report(root, config, env)
        worktree_env = _worktree_environment(root, config)
        checks = checklist(root, config, sandbox)
    except AiSdlcError as exc:
        from ai_sdlc.secrets import redact

        problems.append(redact(f"config: {exc.message}"))
        config_invalid = True
        settings, limits = {}, {}
    name, source, notice = choose_provider_name(
        flag=None, settings=settings, environ=env, which=which
    )
    rows = _statuses(root, settings, which, name)
    chosen = next((r for r in rows if r["name"] == name), None)
    fix = None
    if name == NO_PROVIDER and source == "auto":  # a run refuses: no stand-in is ever chosen
        chosen = {"name": name, "usable": False, "reason": notice}
        notice, fix = None, NO_AI_FIX
    elif chosen is None:
        problems.append(f"unknown provider {name!r} (from {source})")
    environment = {k: ("set" if env.get(k) else "not set") for k in _ENV_SECRETS}
    for k in _ENV_PLAIN:
        environment[k] = _safe_url(env[k]) if env.get(k) else "not set"
    return {
        "project": str(root),
        "selected": {
            "provider": name,
            "source": source,
            "model": resolve_model(name, settings, None, env),
            "usable": bool(chosen and chosen["usable"]),
            "reason": chosen["reason"] if chosen else "unknown provider",
            "notice": notice,
            "fix": fix,
        },
        "providers": rows,
        "sandbox": sandbox,
        "environment": environment,
        "config": {
            "ai": redact_config(settings),
            "limits": {
                k: limits.get(k)
                for k in ("phase_timeout", "story_tokens", "story_cost_usd", "run_cost_usd")
            },
        },
        "config_files": {
            "user": str(user_config_path(env)),
            "project": str(root / CONFIG_RELPATH),
        },
        "settings": effective,
        "worktree_environment": worktree_env,
        "problems": problems,
        "config_invalid": config_invalid,
        "checks": [msgspec.structs.asdict(item) for item in checks],
    }


def sandbox_report(root: Path, config: Any, environ: Mapping[str, str]) -> dict[str, Any]:
    """The sandbox a run would apply here: in force or not and why, and its writable roots
    (for a story's worktree, shown as `<worktree>`)."""
    from ai_sdlc.sandbox import Sandbox

    sandbox = Sandbox.from_config(config, root=root, environ=environ)
    report: dict[str, Any] = {
        "in_force": sandbox.in_force,
        "enabled": sandbox.settings.enabled,
        "required": sandbox.settings.required,
        "backend": sandbox.backend.name,
        "abi": sandbox.availability.abi,
        "detail": sandbox.availability.detail,
        "writable": [
            "<worktree>",
            "<private temp folder>",
            "<private home>",
            *sandbox.private_roots()[1:],
            *sandbox.shared,
        ],
        "private_homes": sandbox.private_roots()[0],
        "private_caches": sandbox.private_roots()[1],
        "writable_holding_the_project": list(sandbox.exposing),
        "unreadable": [p for p in sandbox.deny_read if os.path.lexists(p)],
        "network": sandbox.network_rules(),
        "pid_namespace": sandbox.pid_namespace() or "in force",
        "missing": sandbox.missing_reason(),
        "widened": list(sandbox.widened),
    }
    if not sandbox.settings.enabled:
        report["detail"] = "turned off by sandbox.enabled: false"
    return report


def _render_sandbox(out: Any, sandbox: dict[str, Any]) -> None:
    if not sandbox:
        return
    if sandbox["in_force"]:
        out.data(f"sandbox: ✓ {sandbox['backend']} ({sandbox['detail']})")
        out.data("  writable: " + ", ".join(sandbox["writable"]))
        out.data(
            f"  agent CLIs' private homes: {sandbox['private_homes']}/<workspace> "
            "(your ~/.claude, ~/.codex, ~/.gemini, ~/.cache and ~/.npm are not writable)"
        )
        unreadable = ", ".join(sandbox["unreadable"]) or "none of the credential stores exists"
        out.data(f"  unreadable: {unreadable}")
        network = ", ".join(f"{step}: {rule}" for step, rule in sandbox["network"].items())
        out.data(f"  network: {network}")
        pidns = sandbox["pid_namespace"]
        out.data(
            "  processes: a PID namespace of their own (no /proc/<ancestor>/environ)"
            if pidns == "in force"
            else f"  processes: ✗ no PID namespace ({pidns}): a child may read "
            "/proc/<ai-sdlc>/environ when it runs as root or ai-sdlc is dumpable"
        )
        if sandbox["missing"]:
            out.warn(f"sandbox: {sandbox['missing']}")
        if sandbox["widened"]:
            out.data("  widened by sandbox.writable: " + ", ".join(sandbox["widened"]))
        for raw in sandbox["writable_holding_the_project"]:
            out.warn(
                f"sandbox.writable {raw!r} holds this project: agents and verification commands "
                "can write its .ai-sdlc/ (ledger, config) and git folder"
            )
    else:
        required = " (run --auto and watch refuse to start)" if sandbox["required"] else ""
        out.data(f"sandbox: ✗ none: {sandbox['detail']}{required}")
    out.data("")


def _worktree_environment(root: Path, config: Any) -> dict[str, Any]:
    """Would verification in a story worktree judge the worktree's code (the wrong-tree
    guard a run applies before its first verification)?"""
    from ai_sdlc.worktree_env.diagnose import diagnose

    try:
        return diagnose(root, config)
    except AiSdlcError as exc:
        return {"ok": False, "message": exc.message, "fix": exc.hint, "setup": []}


def _render_text(out: Any, report: dict[str, Any]) -> None:
    from ai_sdlc.cli.terminal import to_json

    sel = report["selected"]
    out.data(f"provider: {sel['provider']} (from {sel['source']}), model: {sel['model'] or '-'}")
    if sel["notice"]:
        out.warn(sel["notice"])
    out.data("")
    _render_sandbox(out, report["sandbox"])
    out.data("providers:")
    for row in report["providers"]:
        mark = "ok " if row["usable"] else "-- "
        packages = "".join(f" ({m} {v})" for m, v in row.get("packages", {}).items())
        out.data(f"  {mark}{row['name']:<10} {row['reason']}{packages}")
    out.data("")
    out.data("environment:")
    for key, value in report["environment"].items():
        out.data(f"  {key}: {value}")
    out.data("")
    files = report["config_files"]
    out.data(f"effective config (secrets masked; user file {files['user']}):")
    for dotted, entry in report["settings"].items():
        out.data(f"  {dotted} = {to_json(entry['value'])}  ({entry['source']})")
    env = report.get("worktree_environment")
    if env is not None:
        out.data("")
        out.data("verification environment (story worktrees):")
        out.data(f"  {'✓' if env['ok'] else '✗'} {env['message']}")
        if env.get("fix"):
            out.data(f"    fix: {env['fix']}")
    for nested in report.get("nested_projects", []):
        out.data("")
        out.data(f"⚠ nested project {nested['folder']} inside the git repository {nested['top']}")
        out.data(f"    {nested['why']}")
        out.data(f"    fix: {nested['fix']}")
    for problem in report["problems"]:
        out.warn(problem)


def nested_projects(cwd: Path) -> list[dict[str, str]]:
    """Every `.ai-sdlc` from `cwd` up to, not including, its git repository's top: a project
    there hides the top's own (or stands apart from it) for every command run below it."""
    from ai_sdlc.git.repo import toplevel

    top = toplevel(cwd)
    if top is None:
        return []
    found = []
    start = cwd.resolve()
    for folder in (start, *start.parents):
        if folder == top or top not in folder.parents:
            break
        if (folder / ".ai-sdlc").is_dir():
            if (top / ".ai-sdlc" / "stories").is_dir():
                why = f"commands run below {folder} use it instead of {top}'s project"
                fix = (
                    f"bring its stories into the top project (ai-sdlc -C {top} add --from "
                    f"<story.md>), then remove {folder / '.ai-sdlc'}"
                )
            else:
                why = f"the repository's top {top} has no project"
                fix = f"move it to the top: mv {folder / '.ai-sdlc'} {top}/"
            found.append(
                {"folder": str(folder / ".ai-sdlc"), "top": str(top), "why": why, "fix": fix}
            )
    return found


def _with_own_items(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole checklist: config (when invalid), the pre-flight items, then doctor's own:
    the provider, the verification environment, nested projects."""
    sel = report["selected"]
    fix = (
        sel.get("fix")
        or "choose another with --provider / AI_SDLC_PROVIDER / ai.provider, or fix the above"
    )
    provider = Item("provider", sel["usable"], ERROR, f"{sel['provider']}: {sel['reason']}")
    items = [provider if sel["usable"] else msgspec.structs.replace(provider, fix=fix)]
    head = []
    if report["config_invalid"]:
        problem = next((p for p in report["problems"] if p.startswith("config")), "invalid")
        head.append(
            {
                "name": "config",
                "ok": False,
                "level": ERROR,
                "detail": problem,
                "fix": "fix the file at the line shown",
            }
        )
    env = report.get("worktree_environment")
    if env is not None:
        items.append(
            Item("verification environment", env["ok"], ERROR, env["message"], env.get("fix") or "")
        )
    for nested in report.get("nested_projects", []):
        detail = f"nested project {nested['folder']}: {nested['why']}"
        items.append(Item("nested project", False, ADVISORY, detail, nested["fix"]))
    return [*head, *report["checks"], *(msgspec.structs.asdict(item) for item in items)]


_MARKS = {True: "✓", False: "✗"}


def _render_checklist(out: Any, checks: list[dict[str, Any]]) -> None:
    """The pre-flight checklist: ✓ ok, ✗ a run needs it, ⚠ advisory; each failure's fix."""
    out.data("checklist:")
    for item in checks:
        mark = "⚠" if not item["ok"] and item["level"] != ERROR else _MARKS[item["ok"]]
        out.data(f"  {mark} {item['name']}: {item['detail']}")
        if not item["ok"] and item["fix"]:
            out.data(f"      fix: {item['fix']}")
    out.data("")


def doctor(ctx: typer.Context, json: JsonOption = False) -> None:
    """Check what a run needs here (git, gh, verify, sandbox, providers), with fixes."""
    app = Application.of(ctx)
    out = app.terminal(json)
    report = build_report(app.project)
    report["nested_projects"] = nested_projects(Path.cwd())
    report["checks"] = _with_own_items(report)
    if json:
        out.json(report)
    else:
        _render_checklist(out, report["checks"])
        _render_text(out, report)
    sel = report["selected"]
    env = report.get("worktree_environment")
    if sel["usable"] and (report["config_invalid"] or (env is not None and not env["ok"])):
        raise typer.Exit(int(ExitCode.INVALID_INPUT))
    if not sel["usable"]:
        if sel.get("fix"):  # nothing configured: no provider was selected at all
            raise ProviderUnavailableError(sel["reason"], hint=sel["fix"])
        raise ProviderUnavailableError(
            f"the selected provider {sel['provider']!r} is not usable: {sel['reason']}",
            hint="fix the above, or choose another with --provider / AI_SDLC_PROVIDER / "
            "ai.provider",
        )
    if any(not item["ok"] and item["level"] == ERROR for item in report["checks"]):
        raise typer.Exit(int(ExitCode.FAILURE))


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
