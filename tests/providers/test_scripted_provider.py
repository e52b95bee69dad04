"""The scripted provider: defaults, rules, faults inside the guard, counts across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ai_sdlc.errors import ExitCode, InvalidInputError
from ai_sdlc.providers.base import (
    Access,
    Phase,
    ProviderAuthError,
    ProviderRequest,
    ProviderRequestError,
    TransientProviderError,
    access_for,
)
from ai_sdlc.providers.decision import parse_decision, split_decision
from ai_sdlc.providers.scripted import (
    RULES_FILE,
    STAMP,
    USAGE_FILE,
    ScriptedProvider,
    changes_file,
)

T = TypeVar("T")


def write_rules(project: Path, text: str) -> None:
    path = project / RULES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def request(
    workspace: Path,
    phase: Phase,
    *,
    story: str = "S-0001",
    attempt: int = 1,
    context: Mapping[str, Any] | None = None,
    access: Access | None = None,
    **extra: Any,
) -> ProviderRequest:
    return ProviderRequest(
        phase=phase,
        prompt="Do the thing for the story." * 10,
        system_prompt="You are an agent.",
        workspace=workspace,
        access=access or access_for(phase),
        timeout=60,
        story_id=story,
        attempt=attempt,
        context=context or {},
        **extra,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path


def test_is_simulated_and_stamps_every_phase(project: Path) -> None:
    provider = ScriptedProvider(project, {})
    assert provider.simulated and provider.name == "scripted"
    assert provider.status().usable
    for phase in Phase:
        result = provider.execute(request(project / "work", phase))
        assert STAMP in result.text, phase


def test_usage_is_a_deterministic_estimate(project: Path) -> None:
    provider = ScriptedProvider(project, {})
    req = request(project / "work", Phase.PLAN)
    result = provider.execute(req)
    assert result.usage.input_tokens == (len(req.system_prompt) + len(req.prompt)) // 4
    assert result.usage.output_tokens == len(result.text) // 4
    assert result.usage.cost_usd is None
    assert provider.execute(req).text == result.text


def test_research_and_plan_defaults_mention_the_story(project: Path) -> None:
    provider = ScriptedProvider(project, {})
    research = provider.execute(request(project / "work", Phase.RESEARCH, story="S-0042"))
    plan = provider.execute(request(project / "work", Phase.PLAN, story="S-0042"))
    assert research.text.startswith("# Research notes for S-0042")
    assert plan.text.startswith("# Implementation plan for S-0042")
    assert research.files_changed == plan.files_changed == []
    assert not (project / "work" / changes_file("S-0042")).exists()


def test_implement_default_appends_one_line_per_attempt(project: Path) -> None:
    provider = ScriptedProvider(project, {})
    work = project / "work"
    first = provider.execute(request(work, Phase.IMPLEMENT, attempt=1))
    provider.execute(request(work, Phase.REWORK, attempt=1))
    provider.execute(request(work, Phase.IMPLEMENT, story="S-0002", attempt=2))
    assert first.files_changed == ["scripted-changes/S-0001.md"]
    assert (work / changes_file("S-0001")).read_text().splitlines() == [
        f"# Changes made by the {STAMP}",
        "",
        "- S-0001 implement attempt 1",
        "- S-0001 rework attempt 1",
    ]
    # Each story its own file: two stories' changes never touch the same lines.
    assert (work / changes_file("S-0002")).read_text().splitlines() == [
        f"# Changes made by the {STAMP}",
        "",
        "- S-0002 implement attempt 2",
    ]


def test_refine_default_keeps_the_body(project: Path) -> None:
    provider = ScriptedProvider(project, {})
    without_body = split_decision(provider.execute(request(project, Phase.REFINE)).text)
    assert without_body.decision == "APPROVED"
    assert without_body.before == ""  # the runner keeps the story's own body
    assert STAMP in without_body.feedback

    body = "# Title\n\nAs a user I want X."
    with_body = provider.execute(request(project, Phase.REFINE, context={"story_body": body}))
    parts = split_decision(with_body.text)
    assert parts.decision == "APPROVED"
    assert parts.before.startswith(body) and STAMP in parts.before
    again = provider.execute(
        request(project, Phase.REFINE, context={"story_body": parts.before}, attempt=2)
    )
    assert split_decision(again.text).before == parts.before  # stamped once, not twice


def test_review_defaults_follow_the_context(project: Path) -> None:
    provider = ScriptedProvider(project, {})

    def review(context: dict[str, Any]) -> tuple[str | None, str]:
        return parse_decision(
            provider.execute(request(project, Phase.REVIEW, context=context)).text
        )

    assert review({"verification_passed": True})[0] == "APPROVED"
    decision, feedback = review({"verification_passed": False, "workspace_changed": False})
    assert decision == "RECOVERY" and "changed nothing" in feedback
    output = "\n".join(f"E   line {i}" for i in range(30))
    decision, feedback = review({"verification_passed": False, "verification_output": output})
    assert decision == "REJECTED"
    assert "> E   line 0" in feedback and "> E   line 19" in feedback
    assert "E   line 20" not in feedback and "10 more lines" in feedback
    assert review({})[0] == "REJECTED"


def test_rule_files_are_written_and_replace_the_default_change(project: Path) -> None:
    write_rules(
        project,
        "rules:\n"
        "  - phase: implement\n"
        "    respond: wrote the module\n"
        "    files:\n"
        '      src/pkg/mod.py: "VALUE = 2\\n"\n'
        "      README.md: hello\n",
    )
    work = project / "work"
    events: list[tuple[str, dict[str, Any]]] = []
    result = ScriptedProvider(project, {}).execute(
        request(work, Phase.IMPLEMENT, on_event=lambda n, d: events.append((n, d)))
    )
    assert (work / "src" / "pkg" / "mod.py").read_text() == "VALUE = 2\n"
    assert (work / "README.md").read_text() == "hello"
    assert result.files_changed == ["src/pkg/mod.py", "README.md"]
    assert result.text.startswith("wrote the module") and STAMP in result.text
    assert not (work / "scripted-changes").exists()
    assert events[0] == ("scripted_rule", {"rule": 1, "line": 2})
    assert ("file_written", {"path": "README.md"}) in events


def test_rule_without_files_changes_nothing(project: Path) -> None:
    write_rules(project, "rules:\n  - phase: implement\n    respond: I did nothing\n")
    result = ScriptedProvider(project, {}).execute(request(project / "work", Phase.IMPLEMENT))
    assert result.files_changed == []
    assert list((project / "work").iterdir()) == []


def test_files_need_edit_access(project: Path) -> None:
    write_rules(project, "rules:\n  - phase: implement\n    files: {a.py: x}\n")
    provider = ScriptedProvider(project, {})
    with pytest.raises(ProviderRequestError, match="read-only"):
        provider.execute(request(project / "work", Phase.IMPLEMENT, access=Access.READ_ONLY))
    assert not (project / "work" / "a.py").exists()


def test_symlink_escape_is_refused(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    work = project / "work"
    (work / "escape").symlink_to(outside, target_is_directory=True)
    write_rules(project, "rules:\n  - phase: implement\n    files: {escape/owned.txt: x}\n")
    with pytest.raises(ProviderRequestError, match="outside the workspace"):
        ScriptedProvider(project, {}).execute(request(work, Phase.IMPLEMENT))
    assert list(outside.iterdir()) == []


def test_decision_rules_for_review_and_refine(project: Path) -> None:
    write_rules(
        project,
        "rules:\n"
        "  - phase: review\n"
        "    decision: REJECTED\n"
        "    feedback: add a test for empty carts\n"
        "  - phase: refine\n"
        "    respond: '# Sharper story'\n"
        "    decision: REJECTED\n",
    )
    provider = ScriptedProvider(project, {})
    review = provider.execute(request(project, Phase.REVIEW, context={"verification_passed": True}))
    assert parse_decision(review.text) == ("REJECTED", "add a test for empty carts")
    refine = split_decision(provider.execute(request(project, Phase.REFINE)).text)
    assert refine.decision == "REJECTED"
    assert refine.before.startswith("# Sharper story") and STAMP in refine.before
    assert refine.feedback == "Decided by scripted rule 2."


def test_review_rule_without_decision_writes_no_decision_line(project: Path) -> None:
    write_rules(project, "rules:\n  - phase: review\n    respond: I am unsure\n")
    result = ScriptedProvider(project, {}).execute(request(project, Phase.REVIEW))
    assert parse_decision(result.text)[0] is None


def test_matching_by_story_and_attempt_first_rule_wins(project: Path) -> None:
    write_rules(
        project,
        "rules:\n"
        "  - phase: plan\n    story: S-0002\n    attempt: 2\n    respond: second plan of 2\n"
        "  - phase: plan\n    story: S-0002\n    respond: any plan of 2\n"
        "  - phase: plan\n    respond: generic plan\n"
        "  - phase: plan\n    respond: never reached\n",
    )
    provider = ScriptedProvider(project, {})

    def plan(story: str, attempt: int) -> str:
        return provider.execute(request(project, Phase.PLAN, story=story, attempt=attempt)).text

    assert plan("S-0002", 2).startswith("second plan of 2")
    assert plan("S-0002", 1).startswith("any plan of 2")
    assert plan("S-0001", 2).startswith("generic plan")
    assert provider.execute(request(project, Phase.RESEARCH)).text.startswith("# Research")


def test_faults_raise_inside_the_guard(project: Path) -> None:
    write_rules(
        project,
        "rules:\n"
        "  - phase: research\n    times: 2\n    fault: {kind: rate_limit, retry_after: 3}\n"
        "  - phase: research\n    respond: notes after the storm\n"
        "  - phase: plan\n    fault: {kind: auth}\n",
    )
    provider = ScriptedProvider(project, {})
    retries: list[BaseException] = []

    def retrying_guard(fn: Callable[[], T]) -> T:
        while True:
            try:
                return fn()
            except TransientProviderError as exc:
                retries.append(exc)

    result = provider.execute(request(project, Phase.RESEARCH, guard=retrying_guard))
    assert result.text.startswith("notes after the storm")
    assert len(retries) == 2
    first = retries[0]
    assert isinstance(first, TransientProviderError)
    assert (first.kind, first.retry_after, first.status) == ("rate_limit", 3.0, 429)

    guarded: list[str] = []

    def recording_guard(fn: Callable[[], T]) -> T:
        guarded.append("called")
        return fn()

    with pytest.raises(ProviderAuthError):
        provider.execute(request(project, Phase.PLAN, guard=recording_guard))
    assert guarded == ["called"]


@pytest.mark.parametrize("kind", ["overloaded", "server", "timeout", "connection"])
def test_every_transient_kind(project: Path, kind: str) -> None:
    write_rules(project, f"rules:\n  - phase: plan\n    fault: {{kind: {kind}}}\n")
    with pytest.raises(TransientProviderError) as caught:
        ScriptedProvider(project, {}).execute(request(project, Phase.PLAN))
    assert caught.value.kind == kind


def test_times_are_persisted_and_reset_by_an_edit(project: Path) -> None:
    rules = "rules:\n  - phase: plan\n    times: 1\n    respond: first\n"
    write_rules(project, rules)
    assert (
        ScriptedProvider(project, {}).execute(request(project, Phase.PLAN)).text.startswith("first")
    )
    # A new provider (as in a new process) sees the rule as spent.
    fresh = ScriptedProvider(project, {})
    assert fresh.execute(request(project, Phase.PLAN)).text.startswith("# Implementation plan")
    state = json.loads((project / USAGE_FILE).read_text())
    assert state["served"] == {"1": 1} and state["rules_sha256"] == fresh.rule_set.digest
    write_rules(project, rules + "# edited\n")
    edited = ScriptedProvider(project, {})
    assert edited.execute(request(project, Phase.PLAN)).text.startswith("first")


def test_damaged_usage_state_is_reported(project: Path) -> None:
    write_rules(project, "rules:\n  - phase: plan\n    times: 1\n    respond: first\n")
    (project / USAGE_FILE).parent.mkdir(parents=True)
    (project / USAGE_FILE).write_text("{not json")
    with pytest.raises(InvalidInputError, match="delete the file") as caught:
        ScriptedProvider(project, {}).execute(request(project, Phase.PLAN))
    assert caught.value.exit_code is ExitCode.INVALID_INPUT


CHILD = """
import sys
from pathlib import Path
from ai_sdlc.providers.base import Phase, ProviderRequest, Access
from ai_sdlc.providers.scripted import ScriptedProvider
project = Path(sys.argv[1])
provider = ScriptedProvider(project, {})
for _ in range(int(sys.argv[2])):
    request = ProviderRequest(
        phase=Phase.PLAN, prompt="p", system_prompt="s", workspace=project,
        access=Access.READ_ONLY, timeout=5, story_id="S-0001",
    )
    print(provider.execute(request).text.splitlines()[0], flush=True)
"""


def test_times_hold_across_concurrent_processes(project: Path) -> None:
    write_rules(project, "rules:\n  - phase: plan\n    times: 5\n    respond: budgeted\n")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(project), "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    lines: list[str] = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        lines += out.splitlines()
    assert len(lines) == 12
    assert lines.count("budgeted") == 5
    assert lines.count("# Implementation plan for S-0001") == 7


def test_rewriting_a_python_file_drops_its_stale_bytecode(tmp_path: Path) -> None:
    """Same size, same second: Python would trust the old `.pyc` (mtime + size) and run the
    previous attempt's code; the scripted writer removes it."""
    import py_compile

    from ai_sdlc.providers.scripted import write_confined

    source = tmp_path / "calc" / "ops.py"
    source.parent.mkdir()
    source.write_text("def f(a, b):\n    return a * b\n")
    cached = Path(py_compile.compile(str(source), doraise=True))
    other = source.parent / "__pycache__" / "other.cpython-311.pyc"
    other.write_bytes(b"not ours")
    assert cached.exists()

    write_confined(tmp_path, "calc/ops.py", "def f(a, b):\n    return a + b\n")

    assert source.read_text().endswith("a + b\n")
    assert not cached.exists()
    assert other.exists()  # another module's cache is left alone
