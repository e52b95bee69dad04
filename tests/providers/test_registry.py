"""The provider registry: names, lazy imports, clear errors for unknown names and missing extras."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ai_sdlc import install_command
from ai_sdlc.errors import ExitCode
from ai_sdlc.providers import registry
from ai_sdlc.providers.base import Provider, ProviderConfigError
from ai_sdlc.providers.dry_run import DryRunProvider
from ai_sdlc.providers.registry import (
    PROVIDER_NAMES,
    ProviderSpec,
    create_provider,
    provider_spec,
)
from ai_sdlc.providers.scripted import ScriptedProvider


def test_names_and_lazy_targets() -> None:
    assert PROVIDER_NAMES == ("scripted", "dry-run", "openai", "anthropic", "claude", "command")
    targets = {name: provider_spec(name).target for name in PROVIDER_NAMES}
    assert targets["openai"] == "ai_sdlc.providers.openai_provider:OpenAIProvider"
    assert targets["anthropic"] == "ai_sdlc.providers.anthropic_provider:AnthropicProvider"
    assert targets["claude"] == "ai_sdlc.providers.claude_provider:ClaudeProvider"
    assert targets["command"] == "ai_sdlc.providers.command_provider:CommandProvider"


def test_creates_the_built_in_providers(tmp_path: Path) -> None:
    scripted = create_provider("scripted", project_root=tmp_path, settings={"provider": "x"})
    assert isinstance(scripted, ScriptedProvider) and scripted.project_root == tmp_path
    dry = create_provider(" Dry-Run ", project_root=tmp_path, settings={})
    assert isinstance(dry, DryRunProvider)


def test_unknown_name_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ProviderConfigError) as caught:
        create_provider("gpt5", project_root=tmp_path, settings={})
    message = str(caught.value)
    assert "unknown provider 'gpt5'" in message
    assert all(name in message for name in PROVIDER_NAMES)
    assert caught.value.exit_code is ExitCode.PROVIDER_UNAVAILABLE


def fake_spec(monkeypatch: pytest.MonkeyPatch, spec: ProviderSpec) -> None:
    monkeypatch.setitem(registry._BY_NAME, spec.name, spec)


def test_missing_extra_gives_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "pkgs"
    package.mkdir()
    (package / "needs_extra_mod.py").write_text(
        "import not_installed_client_lib_xyz\nclass P: pass\n"
    )
    monkeypatch.syspath_prepend(str(package))
    fake_spec(
        monkeypatch,
        ProviderSpec("fancy", "needs_extra_mod:P", "fancy", ("not_installed_client_lib_xyz",)),
    )
    with pytest.raises(ProviderConfigError) as caught:
        create_provider("fancy", project_root=tmp_path, settings={})
    assert "not installed" in caught.value.message
    assert caught.value.hint == install_command("fancy")


def test_missing_provider_module_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_spec(monkeypatch, ProviderSpec("ghost", "ai_sdlc.providers.no_such_module_xyz:Ghost"))
    with pytest.raises(ProviderConfigError, match="cannot be loaded"):
        create_provider("ghost", project_root=tmp_path, settings={})


def test_target_that_is_not_a_provider_is_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_spec(monkeypatch, ProviderSpec("odd", "ai_sdlc.providers.registry:ProviderSpec"))
    with pytest.raises(ProviderConfigError, match="not a Provider class"):
        create_provider("odd", project_root=tmp_path, settings={})


def test_importing_the_package_loads_no_client_library() -> None:
    code = (
        "import sys, ai_sdlc.providers as p\n"
        "p.create_provider('scripted', project_root=__import__('pathlib').Path('.'), "
        "settings={})\n"
        "heavy = [m for m in ('openai', 'anthropic', 'claude_agent_sdk') "
        "if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_every_registered_name_resolves_to_its_provider_class() -> None:
    for name in PROVIDER_NAMES:
        cls = registry.provider_class(name)
        assert issubclass(cls, Provider)
        assert cls.name == name
