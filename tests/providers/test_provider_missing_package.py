"""A provider whose client library is missing never crashes a command.

The package is made unimportable in a real CLI process: a folder on PYTHONPATH (ahead of
site-packages) holds an `openai`/`anthropic` package whose import raises ImportError, as a
missing or broken install does. Auto-detection must pass it over and say which key it saw and
what to install; a provider chosen by name must stop with exit 4 and the install command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc import DISTRIBUTION
from tests.conftest import CliResult, cli_environment, run_cli

pytestmark = pytest.mark.e2e

OPENAI_KEY = "sk-proj-TESTKEYNOTREAL1234567"
ANTHROPIC_KEY = "sk-ant-api03-TESTKEYNOTREAL1234567"


def _shim(tmp_path: Path, *packages: str) -> str:
    folder = tmp_path / "shim"
    for package in packages:
        (folder / package).mkdir(parents=True)
        (folder / package / "__init__.py").write_text(
            f"raise ImportError('No module named {package!r} (test shim)')\n"
        )
    return str(folder)


def _env(tmp_path: Path, shim: str, **extra: str) -> dict[str, str]:
    return {
        "AI_SDLC_PROVIDER": "",
        "AI_SDLC_CONFIG_HOME": str(tmp_path / "user-config"),
        "PYTHONPATH": shim,
        **extra,
    }


def _no_crash(result: CliResult) -> None:
    assert "internal error" not in result.output, result.output
    assert "Traceback" not in result.output, result.output
    assert "ModuleNotFoundError" not in result.output, result.output


@pytest.mark.parametrize(
    ("package", "variable", "key"),
    [("openai", "OPENAI_API_KEY", OPENAI_KEY), ("anthropic", "ANTHROPIC_API_KEY", ANTHROPIC_KEY)],
)
def test_a_key_without_its_package_stops_naming_it_once(
    project: Path, tmp_path: Path, package: str, variable: str, key: str
) -> None:
    """No stand-in: the key says which provider was wanted, so the run stops (exit 4) with the
    install command, instead of running the offline scripted provider."""
    assert run_cli(project, "add", "Missing package story").returncode == 0
    story = (project / ".ai-sdlc" / "stories" / "S-0001" / "story.md").read_bytes()
    env = _env(tmp_path, _shim(tmp_path, package), **{variable: key}, PATH="/usr/bin:/bin")
    result = run_cli(project, "run", "S-0001", env=env, subprocess=True)
    _no_crash(result)
    assert result.returncode == 4, result.output
    warning = f"{variable} is set but the {package} package is not installed"
    lines = [line for line in result.stderr.splitlines() if warning in line]
    assert len(lines) == 1, result.stderr
    assert f"pip install '{DISTRIBUTION}[{package}]'" in lines[0]
    assert "--provider scripted" in result.stderr  # the offline one only when named
    assert key not in result.output
    assert (project / ".ai-sdlc" / "stories" / "S-0001" / "story.md").read_bytes() == story


@pytest.mark.parametrize("how", ["flag", "config", "env"])
def test_a_provider_chosen_by_name_without_its_package_exits_4(
    project: Path, tmp_path: Path, how: str
) -> None:
    assert run_cli(project, "add", "Chosen provider story").returncode == 0
    story = (project / ".ai-sdlc" / "stories" / "S-0001" / "story.md").read_bytes()
    env = _env(tmp_path, _shim(tmp_path, "openai"), OPENAI_API_KEY=OPENAI_KEY)
    args = ["run", "S-0001"]
    if how == "flag":
        args += ["--provider", "openai"]
    elif how == "config":
        assert run_cli(project, "config", "ai.provider", "openai").returncode == 0
    else:
        env["AI_SDLC_PROVIDER"] = "openai"
    result = run_cli(project, *args, env=env, subprocess=True)
    _no_crash(result)
    assert result.returncode == 4, result.output
    assert "needs the 'openai' package, which is not installed" in result.stderr
    assert f"pip install '{DISTRIBUTION}[openai]'" in result.stderr
    assert f"pipx inject {DISTRIBUTION} openai" in result.stderr
    assert {"flag": "--provider", "config": "ai.provider", "env": "AI_SDLC_PROVIDER"}[
        how
    ] in result.stderr
    assert (project / ".ai-sdlc" / "stories" / "S-0001" / "story.md").read_bytes() == story


def test_doctor_calls_it_unusable_and_auto_detect_agrees(project: Path, tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        _shim(tmp_path, "openai", "anthropic"),
        OPENAI_API_KEY=OPENAI_KEY,
        ANTHROPIC_API_KEY=ANTHROPIC_KEY,
        PATH="/usr/bin:/bin",  # no `claude` binary
    )
    result = run_cli(project, "doctor", "--json", env=env, subprocess=True)
    _no_crash(result)
    assert result.returncode == 4, result.output
    report, _end = json.JSONDecoder().raw_decode(result.stdout)  # then the error, as JSON
    rows = {row["name"]: row for row in report["providers"]}
    for package in ("openai", "anthropic"):
        assert rows[package]["usable"] is False
        assert f"pip install '{DISTRIBUTION}[{package}]'" in rows[package]["reason"]
    selected = report["selected"]
    assert selected["provider"] == "none" and selected["source"] == "auto"
    assert selected["usable"] is False
    notice = selected["reason"]
    assert "ANTHROPIC_API_KEY is set but the anthropic package is not installed" in notice
    assert "OPENAI_API_KEY is set but the openai package is not installed" in notice
    assert "\n" not in notice
    assert OPENAI_KEY not in result.output and ANTHROPIC_KEY not in result.output


@pytest.mark.xdist_group("provider-sdks")  # imports an SDK in-process: once per suite
def test_with_the_package_installed_the_key_selects_it(project: Path, tmp_path: Path) -> None:
    """The control: the same environment without the shim picks openai (so the tests above
    fail if detection ignores the key altogether)."""
    env = _env(tmp_path, str(tmp_path / "empty"), OPENAI_API_KEY=OPENAI_KEY, PATH="/usr/bin:/bin")
    result = run_cli(project, "doctor", "--json", env=env)
    assert result.returncode == 0, result.output
    report = json.loads(result.stdout)
    assert report["selected"]["provider"] == "openai", report["selected"]
    assert {r["name"]: r for r in report["providers"]}["openai"]["usable"] is True


def _installed_shim(tmp_path: Path, package: str, version: str) -> str:
    """A package that pip would have installed (its dist-info RECORD lists its files) but whose
    import fails, as when one of its own dependencies was removed."""
    folder = Path(_shim(tmp_path, package))
    info = folder / f"{package}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{package}/__init__.py,,\n{info.name}/METADATA,,\n")
    return str(folder)


def test_doctor_reports_packages_without_importing_them_but_the_selected_one(
    project: Path, tmp_path: Path
) -> None:
    """Only the selected provider's client library is imported (seconds each, S-0019): the
    others are reported from the installed distribution, with its version. So a broken install
    of a provider nobody selected shows its version, and the same install, once selected, is
    found broken by the import a run would do."""
    from importlib import metadata

    shim = _installed_shim(tmp_path, "openai", "9.9.9")
    env = _env(tmp_path, shim, OPENAI_API_KEY=OPENAI_KEY, PATH="/usr/bin:/bin")
    code = (
        "import runpy, sys\n"
        "sys.argv = ['ai-sdlc', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('ai_sdlc', run_name='__main__')\n"
        "finally:\n"
        "    sdks = sorted({'openai', 'anthropic'} & set(sys.modules))\n"
        "    sys.stderr.write('\\nSDKS ' + repr(sdks))\n"
    )
    unselected = subprocess.run(
        [sys.executable, "-c", code, "--project", str(project), "doctor", "--json"],
        capture_output=True,
        text=True,
        env=cli_environment({**env, "AI_SDLC_PROVIDER": "scripted"}),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert unselected.returncode == 0, unselected.stderr
    assert unselected.stderr.rsplit("SDKS ", 1)[1] == "[]"  # neither SDK was imported
    rows = {row["name"]: row for row in json.loads(unselected.stdout)["providers"]}
    assert rows["openai"]["usable"] is True and rows["openai"]["packages"] == {"openai": "9.9.9"}
    assert rows["anthropic"]["packages"] == {"anthropic": metadata.version("anthropic")}

    selected = run_cli(
        project, "doctor", "--json", env={**env, "AI_SDLC_PROVIDER": "openai"}, subprocess=True
    )
    _no_crash(selected)
    assert selected.returncode == 4, selected.output
    report, error = (json.loads(line) for line in selected.stdout.splitlines())
    assert error["event"] == "error" and error["exit_code"] == 4
    rows = {row["name"]: row for row in report["providers"]}
    assert rows["openai"]["usable"] is False
    assert f"pip install '{DISTRIBUTION}[openai]'" in rows["openai"]["reason"]
    text = run_cli(project, "doctor", env={**env, "AI_SDLC_PROVIDER": "scripted"}, subprocess=True)
    assert f"(anthropic {metadata.version('anthropic')})" in text.output
