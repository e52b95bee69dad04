"""The typed config models: `ai-sdlc config KEY VALUE` typed by each key's model (one test per
type, through the real CLI and the file), wrong types refused naming the key and its type,
the file `init` writes holding the models' defaults, docs/configuration.md generated from the
models, and each vocabulary kept in one place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from ai_sdlc.config import DEFAULT_CONFIG_TEXT, SCHEMA, defaults, load_config
from ai_sdlc.config.docs import table
from ai_sdlc.config.resilience import (
    DEFAULT_BUDGET,
    DEFAULT_POLICIES,
    BreakerKeys,
    BudgetKeys,
    PolicyKeys,
)
from tests.conftest import run_cli
from tests.support.paths import ROOT

DOCS = ROOT / "docs" / "configuration.md"


def file_value(root: Path, dotted: str) -> Any:
    node: Any = YAML(typ="safe").load((root / ".ai-sdlc" / "config.yaml").read_text())
    for part in dotted.split("."):
        node = node[part]
    return node


def shown(root: Path, dotted: str) -> Any:
    result = run_cli(root, "config", dotted, "--json")
    assert result.returncode == 0, result.output
    return json.loads(result.stdout)[dotted]


@pytest.mark.parametrize(
    ("dotted", "raw", "expected"),
    [
        pytest.param("limits.global_recovery", "010", 10, id="int-leading-zero"),
        pytest.param("run.max_bounces", "0", 0, id="int-zero"),
        pytest.param("run.stop_conditions.max_retry_rate", "0.25", 0.25, id="float"),
        pytest.param("verify.timeout", "30", 30, id="float-given-an-integer"),
        pytest.param("git.draft", "true", True, id="bool"),
        pytest.param("sandbox.required", "false", False, id="bool-false"),
        pytest.param("git.base_branch", "release/2.x", "release/2.x", id="str"),
        pytest.param("ai.model", "4", "4", id="str-that-reads-as-a-number"),
        pytest.param("verify.test", "false", "false", id="str-command-false"),
        pytest.param(
            "verify.protected", '["tests/", "*_test.go"]', ["tests/", "*_test.go"], id="list"
        ),
        pytest.param("worktree.setup", "[]", [], id="list-empty"),
        pytest.param("run.done_means", "merged", "merged", id="choice"),
        pytest.param("ai.provider", "scripted", "scripted", id="choice-provider"),
        pytest.param("verify.max_parallel", "4", 4, id="optional-set"),
        pytest.param("verify.max_parallel", "null", None, id="optional-null"),
        pytest.param("limits.story_cost_usd", "2.5", 2.5, id="optional-float"),
        pytest.param("ai.command.preset", "codex", "codex", id="provider-model-choice"),
        pytest.param("ai.claude.max_retries", "2", 2, id="provider-model-optional-int"),
    ],
)
def test_config_round_trips_each_type_through_the_cli_and_the_file(
    project: Path, dotted: str, raw: str, expected: Any
) -> None:
    result = run_cli(project, "config", dotted, raw)
    assert result.returncode == 0, result.output
    assert file_value(project, dotted) == expected
    assert type(file_value(project, dotted)) is type(expected)
    assert shown(project, dotted) == expected
    assert load_config(project).get(dotted) == expected
    text = (project / ".ai-sdlc" / "config.yaml").read_text()
    assert "# every recovery of every kind counts" in text  # the comments are kept


@pytest.mark.parametrize(
    ("dotted", "raw", "words"),
    [
        pytest.param("limits.global_recovery", "ten", "an integer from 1 to 1,000", id="int"),
        pytest.param("limits.global_recovery", "0", "an integer from 1 to 1,000", id="int-range"),
        pytest.param("limits.global_recovery", "2.5", "an integer from 1 to 1,000", id="int-float"),
        pytest.param(
            "run.stop_conditions.max_reject_rate", "high", "a rate between 0 and 1", id="float"
        ),
        pytest.param("verify.timeout", ".inf", "a number of seconds > 0", id="float-infinite"),
        pytest.param("git.draft", "maybe", "true or false", id="bool"),
        pytest.param("git.remote", "''", "a name", id="str-blank"),
        pytest.param("sandbox.writable", "5", "a list of folders", id="list"),
        pytest.param("run.done_means", "sometimes", "one of done, pr, merged", id="choice"),
        pytest.param(
            "verify.max_parallel", "0", "an integer from 1 to 256, or null", id="optional"
        ),
        pytest.param(
            "ai.command.prompt_via", "pipe", "one of file, stdin, or null", id="provider-model"
        ),
    ],
)
def test_a_wrong_type_names_the_key_the_type_and_the_line(
    project: Path, dotted: str, raw: str, words: str
) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    before = config.read_bytes()
    result = run_cli(project, "config", dotted, raw)
    # The value typed on the command line is the mistake, not the file: a usage error, as in
    # `ai-sdlc set`, with no file position; the hint is the key's default as a command.
    assert result.returncode == 2, result.output
    assert f"{dotted}: must be {words}" in result.stderr
    assert f"{config}:" not in result.stderr
    assert "its default is " in result.stderr and f"`ai-sdlc config {dotted} " in result.stderr
    assert f" is {SCHEMA[dotted].type_name} " not in result.stderr
    assert "Traceback" not in result.output
    assert config.read_bytes() == before  # nothing written


def test_a_wrong_type_in_the_file_is_reported_at_its_line(project: Path) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    text = config.read_text().replace("  draft: false", "  draft: sometimes")
    config.write_text(text)
    line = text.splitlines().index(next(x for x in text.splitlines() if "draft:" in x)) + 1
    result = run_cli(project, "status")
    assert result.returncode == 3, result.output
    assert f"{config}:{line}: git.draft: must be true or false, got 'sometimes'" in result.stderr


def test_an_unknown_key_is_refused_with_a_suggestion(project: Path) -> None:
    result = run_cli(project, "config", "limits.global_recovry", "5")
    assert result.returncode == 2, result.output  # the command line's mistake, not the file's
    assert "unknown config key 'limits.global_recovry'" in result.stderr
    assert "did you mean 'limits.global_recovery'" in result.stderr


def test_the_file_init_writes_holds_the_models_defaults() -> None:
    written = YAML(typ="safe").load(DEFAULT_CONFIG_TEXT)
    expected = defaults()

    def leaves(node: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in node.items():
            if isinstance(v, dict) and v:
                out.update(leaves(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
        return out

    got = leaves(written)
    assert got  # the file sets keys
    want = leaves(expected)
    for dotted, value in got.items():
        assert dotted in SCHEMA, dotted
        assert value == want[dotted], dotted


def test_configuration_docs_are_generated_from_the_models() -> None:
    assert DOCS.read_text(encoding="utf-8") == table(), (
        "docs/configuration.md differs from the models: run `make config-docs`"
    )
    for dotted in SCHEMA:
        assert f"| `{dotted}`" in DOCS.read_text(encoding="utf-8")


def test_each_vocabulary_has_one_source() -> None:
    import importlib

    from ai_sdlc.config import resilience as checked
    from ai_sdlc.providers import PROVIDER_NAMES, base, cli_output, command_presets, registry
    from ai_sdlc.providers import settings as provider_settings

    backoff = importlib.import_module("ai_sdlc.resilience.backoff")
    classify = importlib.import_module("ai_sdlc.resilience.classify")  # the package shadows it

    assert tuple(s.name for s in registry.PROVIDER_SPECS) == PROVIDER_NAMES
    assert PROVIDER_NAMES is provider_settings.PROVIDER_NAMES
    assert tuple(command_presets.PRESETS) == provider_settings.PRESET_NAMES
    assert tuple(cli_output.OUTPUT_FORMATS) == provider_settings.OUTPUT_FORMATS
    assert base.TRANSIENT_KINDS is checked.TRANSIENT_KINDS  # both from ai_sdlc.errors
    assert classify.NEVER_RETRY_KINDS == checked.NEVER_RETRY_KINDS
    assert tuple(backoff.STRATEGIES) == checked.STRATEGIES
    assert tuple(backoff.JITTERS) == checked.JITTERS
    # The documented resilience models name exactly the keys the checks accept.
    for policy in DEFAULT_POLICIES.values():
        assert set(policy) == set(PolicyKeys.__struct_fields__)
    llm_breaker = DEFAULT_POLICIES["llm"]["breaker"]
    assert set(llm_breaker) == set(BreakerKeys.__struct_fields__)
    assert set(DEFAULT_BUDGET) == set(BudgetKeys.__struct_fields__)


def test_the_effective_config_reads_as_the_typed_models(project: Path) -> None:
    assert run_cli(project, "config", "limits.global_recovery", "07").returncode == 0
    assert run_cli(project, "config", "ai.command.preset", "codex").returncode == 0
    typed = load_config(project, environ={"AI_SDLC_RUN__JOBS": "3"}).typed()
    assert typed.limits.global_recovery == 7
    assert typed.run.jobs == 3
    assert typed.run.stop_conditions.max_retry_rate == 0.5
    assert typed.ai.command is not None and typed.ai.command.preset == "codex"
    assert typed.ai.openai is None  # a provider section nobody wrote
    assert isinstance(typed.verify.timeout, float)
