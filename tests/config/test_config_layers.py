"""Config layers through the real CLI: env > project > user > defaults, each key's source in
`config` and `doctor`, provider sections validated, secrets refused in files and masked."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_cli

SECRET = "sk-proj-NEVERSHOWTHIS123456"


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "user-config"
    folder.mkdir()
    return folder


def cli(project: Path, user_dir: Path, *args: str, **env: str) -> CliResult:
    return run_cli(project, *args, env={"AI_SDLC_CONFIG_HOME": str(user_dir), **env})


def settings(project: Path, user_dir: Path, **env: str) -> dict[str, dict[str, object]]:
    result = cli(project, user_dir, "config", "--json", **env)
    assert result.returncode == 0, result.output
    data: dict[str, dict[str, object]] = json.loads(result.stdout)["settings"]
    return data


def test_precedence_and_sources(project: Path, user_dir: Path) -> None:
    user_file = user_dir / "config.yaml"
    user_file.write_text(
        "# mine\nai:\n  model: user-model\n  prices:\n    user-model: {input_per_mtok: 1}\n"
        "  max_turns: 12\nverify:\n  timeout: 300\n"
    )
    assert cli(project, user_dir, "config", "verify.timeout", "120").returncode == 0
    project_file = project / ".ai-sdlc" / "config.yaml"
    got = settings(project, user_dir)
    assert got["ai.model"] == {"value": "user-model", "source": f"user:{user_file}"}
    assert got["ai.prices.user-model.input_per_mtok"]["source"] == f"user:{user_file}"
    assert got["ai.max_turns"] == {"value": 12, "source": f"user:{user_file}"}
    assert got["verify.timeout"] == {"value": 120, "source": f"project:{project_file}"}
    assert got["limits.phase_timeout"] == {"value": 900, "source": "default"}
    assert got["limits.global_recovery"] == {"value": 10, "source": f"project:{project_file}"}
    env = settings(project, user_dir, AI_SDLC_VERIFY__TIMEOUT="60", AI_SDLC_MODEL="env-model")
    assert env["verify.timeout"] == {"value": 60, "source": "env:AI_SDLC_VERIFY__TIMEOUT"}
    assert env["ai.model"] == {"value": "env-model", "source": "env:AI_SDLC_MODEL"}
    # the same in `config` (text) and in `doctor`
    text = cli(project, user_dir, "config")
    assert f'ai.model = "user-model"  (user:{user_file})' in text.stdout
    assert "limits.phase_timeout = 900  (default)" in text.stdout
    doctor = cli(project, user_dir, "doctor", "--json")
    assert doctor.returncode == 0, doctor.output
    report = json.loads(doctor.stdout)
    assert report["settings"]["ai.max_turns"]["source"] == f"user:{user_file}"
    assert report["settings"]["verify.timeout"]["source"] == f"project:{project_file}"
    assert report["config_files"]["user"] == str(user_file)
    assert report["selected"]["model"] is None or report["selected"]["model"] == "user-model"
    doctor_text = cli(project, user_dir, "doctor")
    assert f"ai.max_turns = 12  (user:{user_file})" in doctor_text.stderr + doctor_text.stdout


def test_values_given_on_the_command_line_or_in_the_environment_read_as_the_file_reads_them(
    project: Path, user_dir: Path
) -> None:
    """YAML 1.2, as config.yaml itself is read: `010` is 10 (not YAML 1.1's octal 8), `0o10`
    is 8, `yes` is text."""
    set_ = cli(project, user_dir, "config", "limits.global_recovery", "010")
    assert set_.returncode == 0, set_.output
    written = (project / ".ai-sdlc" / "config.yaml").read_text()
    assert re.search(r"^  global_recovery: 10 ", written, re.M), written
    assert settings(project, user_dir)["limits.global_recovery"]["value"] == 10
    assert cli(project, user_dir, "config", "verify.timeout", "0o10").returncode == 0
    assert settings(project, user_dir)["verify.timeout"]["value"] == 8
    env = settings(project, user_dir, AI_SDLC_VERIFY__TIMEOUT="090", AI_SDLC_AI__MODEL="yes")
    assert env["verify.timeout"]["value"] == 90
    assert env["ai.model"]["value"] == "yes"


def test_config_user_writes_the_user_file_with_minimal_diff(project: Path, user_dir: Path) -> None:
    user_file = user_dir / "nested" / "config.yaml"
    home = user_dir / "nested"
    first = run_cli(
        project, "config", "--user", "ai.model", "m1", env={"AI_SDLC_CONFIG_HOME": str(home)}
    )
    assert first.returncode == 0, first.output
    assert "ai:\n  model: m1\n" in user_file.read_text()
    user_file.write_text("# my defaults\nai:\n  model: m1   # the cheap one\n")
    second = run_cli(
        project, "config", "--user", "ai.model", "m2", env={"AI_SDLC_CONFIG_HOME": str(home)}
    )
    assert second.returncode == 0, second.output
    assert user_file.read_text() == "# my defaults\nai:\n  model: m2   # the cheap one\n"
    project_text = (project / ".ai-sdlc" / "config.yaml").read_text()
    assert "m2" not in project_text
    got = run_cli(project, "config", "ai.model", env={"AI_SDLC_CONFIG_HOME": str(home)})
    assert got.stdout.strip() == "m2"
    bad = run_cli(
        project,
        "config",
        "--user",
        "limits.global_recovery",
        "many",
        env={"AI_SDLC_CONFIG_HOME": str(home)},
    )
    assert bad.returncode in (2, 3)
    assert "--user" in run_cli(project, "config", "--user").stderr


def test_config_edits_a_file_only_the_round_trip_reader_can_read(
    project: Path, user_dir: Path
) -> None:
    """A tag, an anchor and an alias: the fast reader leaves such a file to ruamel's, and the
    edit still changes one line, keeps the alias, and reads back what it wrote."""
    config = project / ".ai-sdlc" / "config.yaml"
    config.write_text(
        "verify:\n  none: true\nlimits:\n  global_recovery: !!int 9   # tagged\n"
        "  implementation_retries: &r 2\n  review_rejections: *r\n"
    )
    result = cli(project, user_dir, "config", "limits.global_recovery", "8")
    assert result.returncode == 0, result.output
    assert config.read_text() == (
        "verify:\n  none: true\nlimits:\n  global_recovery: 8         # tagged\n"
        "  implementation_retries: &r 2\n  review_rejections: *r\n"
    )
    values = settings(project, user_dir)
    assert values["limits.global_recovery"]["value"] == 8
    assert values["limits.review_rejections"]["value"] == 2


def test_user_file_errors_carry_file_and_line(project: Path, user_dir: Path) -> None:
    user_file = user_dir / "config.yaml"
    user_file.write_text("ai:\n  model: fine\nlimits:\n  global_recovery: lots\n")
    result = cli(project, user_dir, "status")
    assert result.returncode == 3
    assert f"{user_file}:4" in result.stderr and "global_recovery" in result.stderr
    user_file.write_text("ai: [unclosed\n")
    broken = cli(project, user_dir, "status")
    assert broken.returncode == 3 and str(user_file) in broken.stderr
    assert "Traceback" not in broken.output
    user_file.write_text("a: &a [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" * 2)
    hostile = cli(project, user_dir, "status")
    assert hostile.returncode == 3 and str(user_file) in hostile.stderr


def test_user_file_may_tighten_but_not_loosen_a_guardrail(project: Path, user_dir: Path) -> None:
    user_file = user_dir / "config.yaml"
    user_file.write_text("# mine\nlimits:\n  global_recovery: 50\n")
    loose = cli(project, user_dir, "status")
    assert loose.returncode == 3
    assert f"{user_file}:3" in loose.stderr and "loosen" in loose.stderr
    project_file = project / ".ai-sdlc" / "config.yaml"
    project_file.write_text("gates:\n  before_done: true\n")
    user_file.write_text("limits:\n  global_recovery: 5\n  phase_timeout: 60\n")
    got = settings(project, user_dir)
    assert got["limits.global_recovery"] == {"value": 5, "source": f"user:{user_file}"}
    assert got["gates.before_done"] == {"value": True, "source": f"project:{project_file}"}
    user_file.write_text("gates:\n  before_done: false\n")
    assert cli(project, user_dir, "status").returncode == 3
    user_file.write_text("ai:\n  model: m\n")
    refused = cli(project, user_dir, "config", "--user", "limits.review_rejections", "9")
    assert refused.returncode == 3 and "loosen" in refused.stderr
    assert user_file.read_text() == "ai:\n  model: m\n"
    assert (
        cli(project, user_dir, "config", "--user", "limits.review_rejections", "1").returncode == 0
    )
    assert settings(project, user_dir)["limits.review_rejections"]["value"] == 1


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("ai.openai.modle", "ai.openai.model"),
        ("ai.anthropic.strem", "ai.anthropic.stream"),
        ("ai.claude.binry", "ai.claude.binary"),
    ],
)
def test_provider_sections_are_validated(
    project: Path, user_dir: Path, key: str, suggestion: str
) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    before = config.read_bytes()
    result = cli(project, user_dir, "config", key, "1")
    assert result.returncode == 2, result.output  # a mistyped key: the command line's
    assert f"unknown config key '{key}'" in result.stderr
    assert f"did you mean '{suggestion}'" in result.stderr
    assert config.read_bytes() == before
    bogus = cli(project, user_dir, "config", "ai.openai.bogus_key", "1")
    assert bogus.returncode == 3 and config.read_bytes() == before  # "key": a secret
    wrong_type = cli(project, user_dir, "config", "ai.openai.stream", "sometimes")
    assert wrong_type.returncode == 2 and "ai.openai.stream" in wrong_type.stderr  # typed here
    assert cli(project, user_dir, "config", "ai.openai.stream", "false").returncode == 0
    assert cli(project, user_dir, "config", "ai.command.preset", "aider").returncode == 0
    assert cli(project, user_dir, "config", "ai.command.preset", "nano").returncode == 2


@pytest.mark.parametrize(
    ("key", "variable"),
    [
        ("ai.openai.api_key", "OPENAI_API_KEY"),
        ("ai.anthropic.auth_token", "ANTHROPIC_API_KEY"),
        ("notify.webhook_secret", "environment variable"),
        ("ai.command.Password", "environment variable"),
    ],
)
def test_config_refuses_to_write_a_secret(
    project: Path, user_dir: Path, key: str, variable: str
) -> None:
    config = project / ".ai-sdlc" / "config.yaml"
    before = config.read_bytes()
    for extra in ((), ("--user",)):
        result = cli(project, user_dir, "config", *extra, key, SECRET)
        assert result.returncode == 3, result.output
        assert SECRET not in result.output
        assert variable in result.stderr and "nothing was written" in result.stderr
    assert config.read_bytes() == before
    assert not (user_dir / "config.yaml").exists()


@pytest.mark.parametrize("layer", ["user", "project"])
def test_a_hand_edited_secret_is_refused_with_its_line(
    project: Path, user_dir: Path, layer: str
) -> None:
    path = user_dir / "config.yaml" if layer == "user" else project / ".ai-sdlc" / "config.yaml"
    path.write_text(f"ai:\n  model: m\n  openai:\n    api_key: {SECRET}\n")
    for args in (("status",), ("config", "--json"), ("doctor",)):
        result = cli(project, user_dir, *args)
        assert result.returncode == 3, (args, result.output)
        assert SECRET not in result.output
    status = cli(project, user_dir, "status")
    assert f"{path}:4" in status.stderr and "ai.openai.api_key" in status.stderr
    assert "OPENAI_API_KEY" in status.stderr


def test_output_masks_secret_looking_values(project: Path, user_dir: Path) -> None:
    (user_dir / "config.yaml").write_text(
        "ai:\n  openai:\n    base_url: http://me:hunter2@localhost:8080/v1\n"
        "    api_key_env: MY_OPENAI_KEY\n"
    )
    got = settings(project, user_dir, AI_SDLC_NOTIFY__COMMAND=f"notify --token {SECRET}")
    assert got["ai.openai.base_url"]["value"] == "http://***@localhost:8080/v1"
    assert got["ai.openai.api_key_env"]["value"] == "MY_OPENAI_KEY"
    assert SECRET not in json.dumps(got)
    one = cli(project, user_dir, "config", "ai.openai.base_url")
    assert "hunter2" not in one.output and "***@localhost" in one.stdout
    doctor = cli(project, user_dir, "doctor", "--json", MY_OPENAI_KEY=SECRET)
    assert "hunter2" not in doctor.output and SECRET not in doctor.output


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG rule is computed on Linux only")
@pytest.mark.parametrize(
    ("xdg", "home"),
    [
        (None, "/home/someone"),
        ("", "/home/someone"),
        ("relative/config", "/home/someone"),
        ("/srv/xdg-config", "/home/someone"),
        ("/srv/xdg-config/", "/home/someone/"),
        (None, ""),
        (None, "relative-home"),
        (None, "/"),
    ],
)
def test_user_config_folder_is_platformdirs_answer_without_importing_it(
    monkeypatch: pytest.MonkeyPatch, xdg: str | None, home: str
) -> None:
    """The XDG rule computed here (importing platformdirs costs ~15 ms per command) gives
    exactly what platformdirs answers for the same environment."""
    import platformdirs

    from ai_sdlc.config import user_config_path

    monkeypatch.delenv("AI_SDLC_CONFIG_HOME", raising=False)
    if xdg is None:
        monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CONFIG_HOME", xdg)
    monkeypatch.setenv("HOME", home)
    expected = Path(platformdirs.user_config_dir("ai-sdlc", appauthor=False)) / "config.yaml"
    assert user_config_path() == expected


def test_config_user_writes_under_xdg_config_home(project: Path, tmp_path: Path) -> None:
    """Without AI_SDLC_CONFIG_HOME, `config --user` writes $XDG_CONFIG_HOME/ai-sdlc/config.yaml,
    and later commands read it from there."""
    xdg = tmp_path / "xdg"
    env = {"AI_SDLC_CONFIG_HOME": "", "XDG_CONFIG_HOME": str(xdg)}
    written = run_cli(project, "config", "--user", "ai.model", "from-xdg", env=env)
    assert written.returncode == 0, written.output
    assert "model: from-xdg" in (xdg / "ai-sdlc" / "config.yaml").read_text()
    shown = run_cli(project, "config", "ai.model", env=env)
    assert shown.returncode == 0, shown.output
    assert "from-xdg" in shown.stdout
