"""Hostile files (issue 11): no story, config or rules file can hang a command, reach outside
the project, or reset a guardrail.

Every bad file is generated here (no checked-in bombs). Each case runs through the real CLI and
checks: the documented exit code, a message naming the file and the reason, no traceback, and
no byte changed in the bad file or outside the project. Cases that used to hang (FIFO, alias
bomb) run as real subprocesses with a timeout, so that a hang fails the test instead of the
suite; the others run in-process with a deadline. Both are failure guards (60 s): a hang or a
bomb never ends, while a loaded machine must not fail a command that merely ran slowly.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ai_sdlc import untrusted
from tests.conftest import CliResult, run_cli
from tests.support.waits import GUARD

STORY = (
    "---\nid: {id}\ntitle: Story {id}\nstatus: {status}\ntype: feature\npriority: 10\n"
    "created: '2026-01-01'\nupdated: '2026-01-01'\ntotal_recovery_attempts: {total}\n"
    "{extra}---\n# Story {id}\n"
)
#: A command must finish within this (start-up included); a hang is caught by it.
PROCESS_TIMEOUT = GUARD
IN_PROCESS_DEADLINE = GUARD


def story_text(story_id: str, *, status: str = "backlog", total: int = 0, extra: str = "") -> str:
    return STORY.format(id=story_id, status=status, total=total, extra=extra)


def write_story(project: Path, story_id: str, text: str) -> Path:
    folder = project / ".ai-sdlc" / "stories" / story_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "story.md"
    path.write_text(text, encoding="utf-8")
    return path


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def fingerprint(root: Path) -> dict[str, str]:
    """Every entry under `root` (not following links): kind and content digest."""
    seen: dict[str, str] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder) / name
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode):
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(info.st_mode):
                seen[str(path)] = "link:" + os.readlink(path)
            else:
                seen[str(path)] = f"mode:{stat.S_IFMT(info.st_mode)}"
    return seen


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A folder next to the project that no command may touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "story.md").write_text(story_text("S-0003", status="blocked", total=10))
    (folder / "secret.txt").write_text("keep me\n")
    before = fingerprint(folder)
    yield folder
    assert fingerprint(folder) == before, "a byte outside the project changed"


def check(result: CliResult, code: int, *words: str) -> None:
    out = result.output
    assert result.returncode == code, out
    assert "Traceback" not in out and "internal error" not in out, out
    for word in words:
        assert word in out, (word, out)


def cli(project: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli(project, *args, env=env, timeout=IN_PROCESS_DEADLINE)


def process(project: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli(project, *args, env=env, subprocess=True, timeout=PROCESS_TIMEOUT)


# 1. YAML alias bomb ------------------------------------------------------------------------


def test_alias_bomb_in_a_story_is_refused_by_every_command(project: Path, outside: Path) -> None:
    write_story(project, "S-0001", story_text("S-0001"))
    bad = write_story(project, "S-0002", story_text("S-0002", extra=alias_bomb()))
    before = bad.read_bytes()
    for args in (("status",), ("status", "--json"), ("show", "S-0002")):
        check(process(project, *args), 3, str(bad), "expands to more than")
    for args in (("unblock", "S-0002", "--reset-retries"), ("run", "S-0002", "--dry-run")):
        check(cli(project, *args), 3, str(bad), "expands to more than")
    assert bad.read_bytes() == before
    # The good story is still on the board (in-process: `status --json` on these very bytes
    # already ran above in a process of its own, under its timeout, and did not hang).
    listed = cli(project, "status", "--json")
    assert '"S-0001"' in listed.stdout


def test_alias_bomb_in_config_is_refused_by_every_command(project: Path) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text("limits:\n  global_recovery: 10\nx:\n" + _indent(alias_bomb(), 2))
    before = config.read_bytes()
    write_story(project, "S-0001", story_text("S-0001"))
    for args in (("status",), ("doctor",), ("show", "S-0001")):
        check(process(project, *args), 3, str(config), "expands to more than")
    assert config.read_bytes() == before


def _indent(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line for line in text.splitlines(keepends=True))


def test_a_bomb_that_libyaml_cannot_parse_is_scanned_by_ruamel(project: Path) -> None:
    """The limits are checked on libyaml's events when PyYAML has libyaml (ruamel's scanner is
    quadratic in flow nesting); a text libyaml refuses but ruamel reads (a byte-order mark
    inside the document) is checked on ruamel's events, so it cannot slip past."""
    import yaml
    from ruamel.yaml import YAML

    if not yaml.__with_libyaml__:
        pytest.skip("this PyYAML has no libyaml: ruamel scans every text")
    text = "limits:\n  global_recovery: 10\n\ufeffx:\n" + _indent(alias_bomb(), 2)
    with pytest.raises(yaml.YAMLError):
        list(yaml.parse(text, Loader=yaml.CSafeLoader))
    assert list(YAML(typ="rt").parse("limits: 1\n\ufeffx: 2\n"))  # ruamel reads it
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(untrusted.InvalidInputError, match="expands to more than"):
        untrusted.check_yaml(text, str(config))
    check(cli(project, "status"), 3, str(config), "expands to more than")


def test_alias_bomb_in_the_rules_file_is_refused(project: Path) -> None:
    write_story(project, "S-0001", story_text("S-0001"))
    rules = project / ".ai-sdlc" / "scripted.yaml"
    rules.write_text("bomb:\n" + _indent(alias_bomb(), 2) + "rules: []\n")
    result = process(project, "run", "S-0001", "--provider", "scripted")
    check(result, 3, str(rules), "expands to more than")


def test_a_value_that_contains_itself_is_refused(project: Path) -> None:
    bad = write_story(project, "S-0001", story_text("S-0001", extra="loop: &x {b: *x}\n"))
    check(cli(project, "show", "S-0001"), 3, f"{bad}:", "contains itself")


# 2. A FIFO named story.md ------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_story_is_listed_as_bad_and_never_hangs(project: Path, outside: Path) -> None:
    write_story(project, "S-0001", story_text("S-0001"))
    folder = project / ".ai-sdlc" / "stories" / "S-0002"
    folder.mkdir()
    fifo = folder / "story.md"
    os.mkfifo(fifo)
    for args in (("status",), ("status", "--json"), ("show", "S-0002")):
        check(process(project, *args), 3, str(fifo), "FIFO")
    for args in (("unblock", "S-0002", "--reset-retries"), ("run", "S-0002")):
        check(cli(project, *args), 3, str(fifo), "FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert '"S-0001"' in cli(project, "status", "--json").stdout  # (a process above: no hang)


# 3. Deep nesting and huge frontmatter ------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ("deep: " + "[" * 10_000 + "]" * 10_000 + "\n", "nested more than 64 levels"),
        ("deep:\n" + "- " * 5_000 + "x\n", "nested more than 64 levels"),
        ("big: '" + "x" * 300_000 + "'\n", "over the limit of 262,144 bytes"),
        ("".join(f"k{i}: 1\n" for i in range(21_000)), "expands to more than 20,000 values"),
    ],
    ids=["flow-10000-deep", "block-5000-deep", "300KB-value", "21000-keys"],
)
def test_deep_or_huge_frontmatter_is_refused(project: Path, extra: str, reason: str) -> None:
    bad = write_story(project, "S-0001", story_text("S-0001", status="blocked", extra=extra))
    before = bad.read_bytes()
    for args in (("status",), ("show", "S-0001"), ("unblock", "S-0001", "--reset-retries")):
        check(cli(project, *args), 3, str(bad), reason)
    assert bad.read_bytes() == before


def test_limits_are_the_same_on_the_fast_and_the_roundtrip_path(tmp_path: Path) -> None:
    from ai_sdlc.errors import InvalidInputError
    from ai_sdlc.store import loading

    text = story_text("S-0001", extra="deep: " + "[" * 100 + "]" * 100 + "\n").encode()
    with pytest.raises(InvalidInputError) as fast:
        loading.load_fast(tmp_path / "story.md", "S-0001", text)
    with pytest.raises(InvalidInputError) as slow:
        loading.load_roundtrip(tmp_path / "story.md", "S-0001", text)
    assert fast.value.message == slow.value.message
    assert f"nested more than {untrusted.MAX_DEPTH} levels" in fast.value.message


# 4. Unreadable or non-regular story.md -----------------------------------------------------


def _make_kind(folder: Path, kind: str) -> str:
    path = folder / "story.md"
    if kind == "directory":
        path.mkdir()
        return "a directory"
    if kind == "dangling symlink":
        path.symlink_to(folder / "nowhere.md")
        return "a symbolic link"
    if kind == "symlink loop":
        path.symlink_to(path)
        return "a symbolic link"
    path.symlink_to(folder.parent.parent.parent.parent / "outside" / "story.md")
    return "a symbolic link"


@pytest.mark.parametrize("kind", ["directory", "dangling symlink", "symlink loop", "symlink"])
def test_a_non_regular_story_file_is_listed_and_refused(
    project: Path, outside: Path, kind: str
) -> None:
    write_story(project, "S-0001", story_text("S-0001"))
    folder = project / ".ai-sdlc" / "stories" / "S-0003"
    folder.mkdir()
    reason = _make_kind(folder, kind)
    bad = str(folder / "story.md")
    status = cli(project, "status", "--json")
    check(status, 3, bad, reason)
    assert '"S-0001"' in status.stdout
    for args in (("show", "S-0003"), ("unblock", "S-0003", "--reset-retries"), ("run", "S-0003")):
        check(cli(project, *args), 3, bad, reason)
    assert not (folder / "events.jsonl").exists()


def test_an_unreadable_story_is_listed_and_refused(project: Path) -> None:
    bad = write_story(project, "S-0002", story_text("S-0002"))
    bad.chmod(0)
    if os.geteuid() == 0:
        # root reads anything; the same code path is exercised with a real EACCES below
        bad.chmod(0o644)
        pytest.skip("running as root: chmod 000 does not stop root from reading")
    check(cli(project, "status"), 3, str(bad), "permission denied")
    check(cli(project, "show", "S-0002"), 3, str(bad), "permission denied")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root needs the capability drop")
def test_an_unreadable_story_as_root_without_override_rights(project: Path) -> None:
    """Root reads anything through CAP_DAC_OVERRIDE; `setpriv` drops it (and
    CAP_DAC_READ_SEARCH) for the CLI process, so a mode-000 story.md is a real EACCES."""
    import shutil
    import subprocess

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    write_story(project, "S-0001", story_text("S-0001"))
    bad = write_story(project, "S-0002", story_text("S-0002"))
    bad.chmod(0)
    from tests.conftest import cli_environment

    def without_override(*args: str) -> CliResult:
        proc = subprocess.run(
            [
                setpriv,
                "--bounding-set=-dac_override,-dac_read_search",
                sys.executable,
                "-m",
                "ai_sdlc",
                "--project",
                str(project),
                *args,
            ],
            capture_output=True,
            text=True,
            env=cli_environment(),
            timeout=PROCESS_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    probe = without_override("status", "--json")
    if "Operation not permitted" in probe.stderr and "setpriv" in probe.stderr:
        pytest.skip("capabilities cannot be dropped here")
    check(probe, 3, str(bad), "permission denied")
    assert '"S-0001"' in probe.stdout
    check(without_override("show", "S-0002"), 3, str(bad), "permission denied")
    check(without_override("unblock", "S-0002", "--reset-retries"), 3, str(bad), "permission")
    bad.chmod(0o644)


# 5. Symlinks lead outside the project ------------------------------------------------------


def test_a_symlinked_story_folder_is_refused_and_nothing_outside_changes(
    project: Path, outside: Path
) -> None:
    write_story(project, "S-0001", story_text("S-0001"))
    link = project / ".ai-sdlc" / "stories" / "S-0003"
    link.symlink_to(outside)
    for args in (("unblock", "S-0003", "--reset-retries"), ("show", "S-0003"), ("run", "S-0003")):
        check(cli(project, *args), 3, str(link), "symbolic link")
    check(cli(project, "status"), 3, str(link), "symbolic link")
    assert not (outside / "events.jsonl").exists()


def test_a_symlinked_ai_sdlc_tree_is_refused(tmp_path: Path, outside: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    real = tmp_path / "outside" / "tree"
    real.mkdir()
    (project / ".ai-sdlc").symlink_to(real)
    (real / "stories").mkdir()
    check(cli(project, "status"), 3, str(project / ".ai-sdlc"), "symbolic link")
    check(cli(project, "init"), 3, str(project / ".ai-sdlc"), "symbolic link")
    (real / "stories").rmdir()
    real.rmdir()


# 6. Nothing but the owner writes .ai-sdlc/ -------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [".ai-sdlc/stories/S-0001/story.md", ".AI-SDLC/config.yaml", "src/.Git/hooks/pre-commit"],
)
def test_scripted_rules_may_not_write_into_protected_folders(project: Path, target: str) -> None:
    story = write_story(project, "S-0001", story_text("S-0001", status="blocked", total=10))
    before = story.read_bytes()
    rules = project / ".ai-sdlc" / "scripted.yaml"
    rules.write_text(
        "rules:\n  - phase: implement\n    files:\n"
        f'      {target}: "---\\nstatus: done\\ntotal_recovery_attempts: 0\\n---\\n"\n'
    )
    result = cli(project, "run", "S-0001", "--provider", "scripted")
    check(result, 3, f"{rules}:4", "protected folder")
    assert story.read_bytes() == before


def test_every_provider_shares_one_confinement(tmp_path: Path) -> None:
    from ai_sdlc.providers import paths, scripted, tools
    from ai_sdlc.providers.base import ProviderError

    (tmp_path / ".ai-sdlc").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / ".ai-sdlc")
    box = tools.ToolRoot(tmp_path)
    for raw in (".ai-sdlc/x", ".Ai-Sdlc/x", ".GIT/config", "alias/config.yaml", "a\\..\\x"):
        with pytest.raises(paths.PathRefused):
            paths.confine(tmp_path, raw, write=True)
        with pytest.raises(tools.ToolRefused):
            box.resolve(raw, write=True)
        with pytest.raises(ProviderError):
            scripted.write_confined(tmp_path, raw, "x")
    assert box.resolve(".ai-sdlc/config.yaml") == (tmp_path / ".ai-sdlc" / "config.yaml")
    assert not any((tmp_path / ".ai-sdlc").iterdir())


# 7-10. Validated at write time --------------------------------------------------------------


def config_bytes(project: Path) -> bytes:
    return (project / ".ai-sdlc" / "config.yaml").read_bytes()


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("verify.test", "a 'b", "balanced quotes"),
        ("verify.build", 'make "x', "balanced quotes"),
        ("ai.openai.base_url", "file:///etc/passwd", "http:// or https://"),
        ("ai.anthropic.base_url", "ftp://h/x", "http:// or https://"),
        ("limits.global_recovery", "99999999999999999999999", "from 1 to 1,000"),
        ("limits.global_recovery", "99999", "from 1 to 1,000"),
        ("limits.global_recovery", "0", "from 1 to 1,000"),
        ("limits.implementation_retries", "5000", "from 0 to 1,000"),
        ("limits.story_cost_usd", ".inf", "positive number"),
    ],
)
def test_config_refuses_values_that_would_fail_at_run_time(
    project: Path, key: str, value: str, reason: str
) -> None:
    before = config_bytes(project)
    result = cli(project, "config", key, value)
    check(result, 2, f"error: {key}: must", reason)  # typed on the command line: a usage error
    assert config_bytes(project) == before


def test_a_bad_base_url_in_the_file_is_reported_by_every_command(project: Path) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text("ai:\n  openai:\n    base_url: file:///etc/passwd\n")
    check(cli(project, "status"), 3, f"{config}:3", "http:// or https://")


def test_doctor_masks_userinfo_and_credential_query_parameters(project: Path) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text(
        "ai:\n  openai:\n    base_url: https://me:pw1234567@llm.example/v1"
        "?api_key=sk1234secret&model=x&sig=abcdefgh\n"
    )
    # `doctor` imports every provider's client library (seconds of CPU on a busy machine): the
    # process deadline, not the 5-second one, so the masking is what this test judges.
    result = run_cli(
        project,
        "doctor",
        "--json",
        env={"OPENAI_BASE_URL": "https://h/?token=t0k3n99"},
        timeout=PROCESS_TIMEOUT,
    )
    out = result.output
    assert "llm.example/v1?api_key=***&model=x&sig=***" in out, out
    for secret in ("pw1234567", "sk1234secret", "abcdefgh", "t0k3n99"):
        assert secret not in out
    from ai_sdlc.secrets import redact

    assert redact("GET https://u:p4ssw0rd@h/x?access_token=zz9, then") == (
        "GET https://***@h/x?access_token=***, then"
    )


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("retry_count: 100000000000000000000000000\n", "retry_count"),
        ("recovery_breakdown: {rework: 1000000001}\n", "recovery_breakdown.rework"),
        ("priority: -3\n", "priority"),
        ("created: not-a-date\n", "created"),
        ("blocked_at: 12\n", "blocked_at"),
        ("type: Big Epic\n", "type"),
    ],
)
def test_story_values_out_of_bounds_are_bad_stories(project: Path, extra: str, field: str) -> None:
    text = story_text("S-0001")
    key = extra.split(":", 1)[0]
    text = "\n".join(line for line in text.split("\n") if not line.startswith(key + ":"))
    bad = write_story(project, "S-0001", text.replace("---\n#", extra + "---\n#"))
    before = bad.read_bytes()
    check(cli(project, "status"), 3, str(bad), f"`{field}`")
    check(cli(project, "show", "S-0001"), 3, str(bad), f"`{field}`")
    assert bad.read_bytes() == before


def test_add_and_the_loader_apply_the_same_type_rule(project: Path) -> None:
    check(cli(project, "add", "An epic", "--type", "Big Epic"), 2, "not a story type")
    check(cli(project, "add", "A spike", "--type", "spike"), 0)
    check(cli(project, "add", "A migration", "--type", "migration"), 0)  # any lowercase word
    assert cli(project, "status").returncode == 0


# Guardrails: the environment may tighten, never loosen ---------------------------------------


def test_an_environment_override_may_lower_but_not_raise_a_guardrail(project: Path) -> None:
    write_story(project, "S-0001", story_text("S-0001"))
    lower = cli(project, "show", "S-0001", "--json", env={"AI_SDLC_LIMITS__GLOBAL_RECOVERY": "3"})
    assert lower.returncode == 0 and '"global_recovery_limit": 3' in lower.stdout, lower.output
    raised = cli(project, "show", "S-0001", env={"AI_SDLC_LIMITS__GLOBAL_RECOVERY": "50"})
    check(raised, 3, "AI_SDLC_LIMITS__GLOBAL_RECOVERY=50", "project's value is 10", "unset")
    check(cli(project, "config", "limits.global_recovery", "4"), 0)
    raised = cli(project, "status", env={"AI_SDLC_LIMITS__GLOBAL_RECOVERY": "5"})
    check(raised, 3, "project's value is 4")
    budget = cli(project, "status", env={"AI_SDLC_LIMITS__STORY_COST_USD": "2.5"})
    assert budget.returncode == 0, budget.output
    check(cli(project, "config", "limits.story_cost_usd", "2"), 0)
    check(cli(project, "status", env={"AI_SDLC_LIMITS__STORY_COST_USD": "null"}), 3, "loosen")
    check(cli(project, "config", "gates.before_done", "true"), 0)
    check(cli(project, "status", env={"AI_SDLC_GATES__BEFORE_DONE": "false"}), 3, "loosen")


def test_config_set_changes_only_the_lines_of_its_key(project: Path) -> None:
    before = config_bytes(project).decode().splitlines(keepends=True)
    check(cli(project, "config", "gates.before_done", "true"), 0)
    after = config_bytes(project).decode().splitlines(keepends=True)
    assert len(after) == len(before)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert len(changed) == 1 and after[changed[0]].lstrip().startswith("before_done: true")
    assert after[changed[0]].index("#") == before[changed[0]].index("#")  # comment column kept
    check(cli(project, "config", "limits.phase_timeout", "120"), 0)
    added = config_bytes(project).decode().splitlines(keepends=True)
    assert [line for line in added if line not in after] == ["  phase_timeout: 120\n"]
    assert [line for line in after if line not in added] == []
    check(cli(project, "config", "verify.test", "pytest -q 'tests/a b.py'"), 0)
    got = cli(project, "config", "verify.test")
    assert got.stdout.strip() == "pytest -q 'tests/a b.py'", got.output
