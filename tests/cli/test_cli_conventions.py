"""What users of git, gh or hatch expect: the project found from any subfolder, global options
after the command, `-h`, shell completion, `-q`/`-v`, and a final NDJSON error event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CliResult, _run_in_process, cli_environment, run_cli


def run_in(cwd: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    """`ai-sdlc <args>` started in `cwd` with no --project (run_cli always passes one)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        return _run_in_process(["ai-sdlc", *args][1:], cli_environment(env), "", 120)


def test_every_command_works_from_a_subfolder(project: Path) -> None:
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    added = run_in(deep, "add", "From below")
    assert (added.returncode, added.stdout) == (0, "S-0001\n"), added.output
    assert (project / ".ai-sdlc" / "stories" / "S-0001" / "story.md").is_file()
    assert not (deep / ".ai-sdlc").exists()
    for args in (
        ("status",),
        ("show", "S-0001"),
        ("config", "limits.global_recovery"),
        ("run", "S-0001"),
        ("log", "S-0001"),
        ("metrics",),
        ("doctor",),
    ):
        result = run_in(deep, *args)
        assert result.returncode == 0, (args, result.output)
    shown = json.loads(run_in(deep, "show", "S-0001", "--json").stdout)
    assert shown["frontmatter"]["status"] == "done"


def test_init_creates_in_the_current_folder_even_inside_a_project(project: Path) -> None:
    sub = project / "service"
    sub.mkdir()
    result = run_in(sub, "init")
    assert result.returncode == 0, result.output
    assert (sub / ".ai-sdlc" / "stories").is_dir()
    # and from then on commands below `service` use the nearer project
    assert run_in(sub, "add", "Inner").stdout == "S-0001\n"
    assert run_in(project, "add", "Outer").stdout == "S-0001\n"


def test_the_walk_stops_at_home(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    home = outer / "home"
    work = home / "work"
    work.mkdir(parents=True)
    assert run_cli(outer, "init").returncode == 0
    env = {"HOME": str(home)}
    result = run_in(work, "status", env=env)
    assert result.returncode == 1
    assert f"no ai-sdlc project in {work} or above" in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.output
    # Outside $HOME the walk goes on to the filesystem root.
    assert run_in(work, "status", env={"HOME": str(tmp_path / "elsewhere")}).returncode == 0


def test_project_option_is_accepted_after_the_command(project: Path, tmp_path: Path) -> None:
    assert run_cli(project, "add", "Here").returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (
        ("status", "--json", "-C", str(project)),
        ("status", "--json", f"--project={project}"),
        ("status", f"-C{project}", "--json"),
    ):
        result = run_in(elsewhere, *args)
        assert result.returncode == 0, (args, result.output)
        assert json.loads(result.stdout)["counts"]["total"] == 1
    # run_cli puts --project first; the one after the command wins, as the later option.
    later = run_cli(elsewhere, "show", "S-0001", "--json", "-C", str(project))
    assert later.returncode == 0 and json.loads(later.stdout)["id"] == "S-0001"
    # after `--` it is an argument, not an option
    title = run_cli(project, "add", "--", "-C")
    assert title.returncode == 0 and title.stdout == "S-0002\n"
    assert (
        json.loads(run_cli(project, "show", "S-0002", "--json").stdout)["frontmatter"]["title"]
        == "-C"
    )


def test_a_run_line_means_the_same_wherever_its_options_stand(
    project: Path, tmp_path: Path
) -> None:
    """Global options before or after `run` (the later `-C` wins), `--project=`, the
    AI_SDLC_PROJECT variable, `--provider=NAME`, a flag given twice: each line runs its story."""
    for title in ("One", "Two", "Three"):
        assert run_cli(project, "add", title).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = ("-C", str(elsewhere), "-v", "run", "S-0001", "-C", str(project), "--json", "--json")
    second = (f"--project={project}", "-q", "run", "--provider=scripted", "--no-worktree", "S-0002")
    third = ("run", "S-0003", "--provider", "scripted")
    outputs = []
    for args, env in ((first, None), (second, None), (third, {"AI_SDLC_PROJECT": str(project)})):
        result = run_in(elsewhere, *args, env=env)
        assert result.returncode == 0, (args, result.output)
        outputs.append(result.stdout)
    final = json.loads(outputs[0].splitlines()[-1])
    assert final["event"] == "run_finished" and final["outcomes"][0]["result"] == "done"
    for sid in ("S-0001", "S-0002", "S-0003"):
        shown = json.loads(run_cli(project, "show", sid, "--json").stdout)
        assert shown["frontmatter"]["status"] == "done", sid


def test_a_run_line_typer_refuses_says_why(project: Path) -> None:
    both = run_cli(project, "-v", "-q", "run", "S-0001")
    assert both.returncode == 2 and "use one of --verbose and --quiet" in both.stderr
    two = run_cli(project, "run", "S-0001", "S-0002")
    assert two.returncode == 2 and "give one story, or several with --batch" in two.stderr
    empty = run_cli(project, "run", "S-0001", "--provider=")
    assert empty.returncode == 2 and "unknown provider" in empty.stderr
    missing = run_cli(project, "run", "S-0404")
    assert missing.returncode != 0 and "S-0404" in missing.stderr


def test_h_is_help_everywhere(project: Path) -> None:
    for args in (("-h",), ("status", "-h"), ("runs", "show", "-h"), ("log", "-h")):
        result = run_cli(project, *args)
        assert result.returncode == 0, (args, result.output)
        assert "Usage: ai-sdlc" in result.stdout and "-h, --help" in result.stdout, args
    top = run_cli(project, "-h").stdout
    for option in ("--verbose", "--quiet", "--install-completion", "--show-completion", "log"):
        assert option in top


def test_shell_completion_script_and_answers(project: Path) -> None:
    # Typer detects the user's shell from the parent process (shellingham), which under
    # pytest-xdist is Python: name the shell instead, the way typer's own tests do.
    script = run_cli(
        project,
        "--show-completion",
        "bash",
        env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
    )
    assert script.returncode == 0 and "_AI_SDLC_COMPLETE=complete_bash" in script.stdout
    env = {"_AI_SDLC_COMPLETE": "complete_bash", "COMP_WORDS": "ai-sdlc st", "COMP_CWORD": "1"}
    names = run_in(project, env=env)
    assert names.returncode == 0 and names.stdout.split() == ["status"]
    env |= {"COMP_WORDS": "ai-sdlc log S-0001 --fo", "COMP_CWORD": "3"}
    options = run_in(project, env=env)
    assert options.returncode == 0 and options.stdout.split() == ["--follow"]


def test_quiet_and_verbose(cli: object, project: Path) -> None:
    assert run_cli(project, "add", "One").returncode == 0
    assert run_cli(project, "add", "Two").returncode == 0
    normal = run_cli(project, "run", "S-0001")
    assert normal.returncode == 0 and "[S-0001] refine" in normal.stderr
    assert "debug:" not in normal.stderr
    quiet = run_cli(project, "run", "S-0002", "-q")
    assert quiet.returncode == 0, quiet.output
    assert quiet.stdout.splitlines() == ["S-0002: done"] and quiet.stderr == ""
    verbose = run_cli(project, "-v", "run", "S-0002", "--step", "refine")
    assert "debug: provider scripted, model" in verbose.stderr
    both = run_cli(project, "-v", "-q", "status")
    assert both.returncode == 2 and "--verbose and --quiet" in both.stderr
    # quiet keeps errors
    missing = run_cli(project, "-q", "show", "S-0042")
    assert missing.returncode == 1 and "error: no story S-0042" in missing.stderr


def final_event(result: CliResult) -> dict[str, object]:
    value = json.loads(result.stdout.splitlines()[-1])
    assert isinstance(value, dict)
    return value


def test_json_mode_failures_end_with_an_error_event(project: Path, tmp_path: Path) -> None:
    cases = [
        (("run", "S-0099", "--json"), 1, "no story S-0099"),
        (("show", "../etc", "--json"), 2, ""),
        (("status", "--json", "--bogus"), 2, "No such option: --bogus"),
        (("log", "S-0001", "--kind", "nope", "--json"), 2, "unknown event kind 'nope'"),
    ]
    for args, code, text in cases:
        result = run_cli(project, *args)
        assert result.returncode == code, (args, result.output)
        event = final_event(result)
        assert event["event"] == "error" and event["exit_code"] == code, (args, event)
        assert text in str(event["message"]), (args, event)
        assert "hint" in event and ("error:" in result.stderr or "Error" in result.stderr)
    not_a_project = run_cli(tmp_path, "status", "--json")
    assert final_event(not_a_project) == {
        "event": "error",
        "message": f"no ai-sdlc project in {tmp_path.resolve()}",
        "hint": "run 'ai-sdlc init' in the project's folder, or pass -C <folder>",
        "exit_code": 1,
    }
    # success: no error event, and without --json none either
    assert run_cli(project, "add", "x").returncode == 0
    ok = run_cli(project, "run", "S-0001", "--json")
    assert ok.returncode == 0 and final_event(ok)["event"] == "run_finished"
    assert run_cli(project, "show", "S-0099").stdout == ""
