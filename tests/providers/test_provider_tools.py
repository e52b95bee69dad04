"""Confinement of the agent tools: paths, access per phase, the command allow-list."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from ai_sdlc.providers.base import Access, Phase, ProviderRequest
from ai_sdlc.providers.snapshots import changed_paths, snapshot
from ai_sdlc.providers.tools import (
    CommandPolicy,
    ToolBox,
    ToolRoot,
    command_policy,
    toolbox_for,
)
from ai_sdlc.secrets import scrubbed_env
from tests.support.waits import GUARD, NEVER


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    return root


def box(root: Path, access: Access = Access.EDIT, commands: CommandPolicy | None = None) -> ToolBox:
    return ToolBox(ToolRoot(root), access, commands)


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd", "~/x"])
def test_reads_outside_the_workspace_are_refused(ws: Path, path: str) -> None:
    outcome = box(ws).call("read_file", {"path": path})
    assert outcome.is_error and outcome.text.startswith("refused")
    assert "TOP SECRET" not in outcome.text


@pytest.mark.parametrize("path", ["../evil.txt", "/tmp/evil.txt", "src/../../evil.txt"])
def test_writes_outside_the_workspace_are_refused(ws: Path, path: str) -> None:
    outcome = box(ws).call("write_file", {"path": path, "content": "x"})
    assert outcome.is_error
    assert not (ws.parent / "evil.txt").exists()


def test_symlinks_pointing_out_are_refused(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    (ws / "linkdir").symlink_to(ws.parent)
    b = box(ws)
    for call, args in [
        ("read_file", {"path": "link.txt"}),
        ("read_file", {"path": "linkdir/secret.txt"}),
        ("write_file", {"path": "link.txt", "content": "pwned"}),
        ("write_file", {"path": "linkdir/new.txt", "content": "pwned"}),
        ("edit_file", {"path": "link.txt", "old_string": "TOP", "new_string": "NOT"}),
        ("list_dir", {"path": "linkdir"}),
        ("search", {"pattern": "SECRET", "path": "linkdir"}),
    ]:
        outcome = b.call(call, args)
        assert outcome.is_error, (call, args)
    assert (ws.parent / "secret.txt").read_text() == "TOP SECRET"
    assert not (ws.parent / "new.txt").exists()
    # and a plain search of the workspace does not follow them either
    assert "TOP SECRET" not in b.call("search", {"pattern": "SECRET"}).text


def test_protected_folders_are_read_only(ws: Path) -> None:
    b = box(ws)
    assert b.call("write_file", {"path": ".git/hooks/pre-commit", "content": "x"}).is_error
    assert b.call(
        "write_file", {"path": ".ai-sdlc/stories/S-0001/story.md", "content": "x"}
    ).is_error
    assert not (ws / ".git" / "hooks").exists()
    assert not b.call("read_file", {"path": ".git/config"}).is_error


def test_read_only_phase_has_no_write_tools(ws: Path) -> None:
    b = box(ws, Access.READ_ONLY)
    assert {s.name for s in b.specs} == {"read_file", "list_dir", "search"}
    outcome = b.call("write_file", {"path": "src/app.py", "content": "gone"})
    assert outcome.is_error and "read-only" in outcome.text
    assert b.call(
        "edit_file", {"path": "src/app.py", "old_string": "1", "new_string": "2"}
    ).is_error
    assert (ws / "src" / "app.py").read_text().endswith("return 1\n")
    assert b.files_changed == []


def test_write_and_edit_inside_the_workspace(ws: Path) -> None:
    b = box(ws)
    assert not b.call("write_file", {"path": "src/new/mod.py", "content": "X = 1\n"}).is_error
    assert (ws / "src" / "new" / "mod.py").read_text() == "X = 1\n"
    edited = b.call(
        "edit_file", {"path": "src/app.py", "old_string": "return 1", "new_string": "return 2"}
    )
    assert not edited.is_error
    assert "return 2" in (ws / "src" / "app.py").read_text()
    assert b.files_changed == ["src/new/mod.py", "src/app.py"]


def test_edit_needs_exactly_one_match(ws: Path) -> None:
    (ws / "dup.txt").write_text("a\na\n")
    b = box(ws)
    many = b.call("edit_file", {"path": "dup.txt", "old_string": "a", "new_string": "b"})
    none = b.call("edit_file", {"path": "dup.txt", "old_string": "zzz", "new_string": "b"})
    assert many.is_error and "2 times" in many.text
    assert none.is_error and "0 times" in none.text
    assert (ws / "dup.txt").read_text() == "a\na\n"


def test_list_and_search(ws: Path) -> None:
    b = box(ws, Access.READ_ONLY)
    listing = b.call("list_dir", {})
    assert listing.text.splitlines() == ["src/"]
    hits = b.call("search", {"pattern": "def main"})
    assert hits.text == "src/app.py:1: def main():"
    assert b.call("search", {"pattern": r"return \d", "regex": True}).text.startswith(
        "src/app.py:2"
    )
    assert b.call("search", {"pattern": "(", "regex": True}).is_error
    assert b.call("search", {"pattern": "nothing-like-this"}).text == "no matches"


def test_unknown_tool_and_bad_arguments(ws: Path) -> None:
    b = box(ws)
    assert b.call("rm_rf", {}).is_error
    assert b.call("read_file", {"path": 42}).is_error
    assert b.call("write_file", {"path": "a.txt"}).is_error


# --- run_command -------------------------------------------------------------------------


def policy(
    *prefixes: tuple[str, ...], timeout: float = 10.0, max_output: int = 2000
) -> CommandPolicy:
    return CommandPolicy(allow=prefixes, timeout=timeout, max_output_chars=max_output)


def test_run_command_only_from_the_allow_list(ws: Path) -> None:
    b = box(ws, commands=policy((sys.executable, "-c")))
    assert "run_command" in {s.name for s in b.specs}
    ok = b.call("run_command", {"argv": [sys.executable, "-c", "print('hi')"]})
    assert not ok.is_error and ok.text.startswith("exit code 0") and "hi" in ok.text
    refused = b.call("run_command", {"argv": ["rm", "-rf", "."]})
    assert refused.is_error and "allow-list" in refused.text
    as_string = b.call("run_command", {"argv": f"{sys.executable} -c 'print(1)'"})
    assert as_string.is_error
    assert (ws / "src" / "app.py").exists()


def test_run_command_never_uses_a_shell(ws: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    title = f"Fix it; touch {marker} && echo $(id) `whoami` | cat > {marker}"
    b = box(ws, commands=policy((sys.executable, "-c")))
    out = b.call(
        "run_command", {"argv": [sys.executable, "-c", "import sys; print(sys.argv[1])", title]}
    )
    assert title in out.text  # passed through verbatim as one argument
    assert not marker.exists()
    # and a metacharacter-laden command line as argv[0] is just a missing program
    assert b.call("run_command", {"argv": [title]}).is_error
    assert not marker.exists()


def test_run_command_timeout_kills_and_output_truncates(ws: Path) -> None:
    b = box(ws, commands=policy((sys.executable, "-c"), timeout=0.3, max_output=200))
    started = time.monotonic()
    sleeper = f"import time; time.sleep({NEVER})"  # only the kill ends it within the guard
    slow = b.call("run_command", {"argv": [sys.executable, "-c", sleeper]})
    assert slow.is_error and "timed out" in slow.text
    assert time.monotonic() - started < GUARD  # killed, not waited for
    # Truncation under a limit no loaded machine reaches (at 0.3 s a slow start would time out).
    b = box(ws, commands=policy((sys.executable, "-c"), timeout=GUARD, max_output=200))
    loud = b.call("run_command", {"argv": [sys.executable, "-c", "print('x' * 5000)"]})
    assert "truncated" in loud.text and len(loud.text) < 400


def test_run_command_environment_has_no_secrets(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak-123456")
    monkeypatch.setenv("HARMLESS", "visible")
    b = box(ws, commands=policy((sys.executable, "-c")))
    out = b.call(
        "run_command",
        {"argv": [sys.executable, "-c", "import os; print(sorted(os.environ.items()))"]},
    )
    assert "sk-should-not-leak" not in out.text and "visible" in out.text
    assert "OPENAI_API_KEY" not in scrubbed_env()


def test_command_policy_from_settings() -> None:
    settings = {"tools": {"allow_commands": ["pytest -q", ["npm", "test"]], "command_timeout": 5}}
    implement = command_policy(settings, Phase.IMPLEMENT)
    assert implement is not None and implement.allow == (("pytest", "-q"), ("npm", "test"))
    assert implement.allows(["pytest", "-q", "tests/x.py"])
    assert not implement.allows(["pytest"])
    assert command_policy(settings, Phase.REVIEW) is None  # not a command phase by default
    assert command_policy({}, Phase.IMPLEMENT) is None
    wider = {"tools": {"allow_commands": ["pytest"], "command_phases": ["review"]}}
    assert command_policy(wider, Phase.REVIEW) is not None


def test_toolbox_for_follows_the_request(ws: Path) -> None:
    request = ProviderRequest(
        phase=Phase.REVIEW,
        prompt="p",
        system_prompt="s",
        workspace=ws,
        access=Access.READ_ONLY,
        timeout=10,
        story_id="S-0001",
    )
    assert {s.name for s in toolbox_for(request, {}).specs} == {"read_file", "list_dir", "search"}


def test_snapshots_see_added_changed_and_removed_files(ws: Path) -> None:
    before = snapshot(ws)
    assert before is not None and ".git/config" not in before
    (ws / "new.txt").write_text("n")
    os.remove(ws / "src" / "app.py")
    after = snapshot(ws)
    assert after is not None
    assert changed_paths(before, after) == ["new.txt", "src/app.py"]
