"""Provider names → classes, imported lazily.

`import anthropic` alone costs over a second, so nothing is imported until a provider is asked
for by name; a missing optional extra becomes a `ProviderConfigError` with the install line.
`missing_package` tells, before anything runs, whether a provider's client library imports:
auto-detection, `doctor` (for the selected provider) and an explicit `--provider` all ask it,
so none of them meets a ModuleNotFoundError mid-run. `package_versions` answers the same without
importing when the installed distribution's RECORD vouches for the module: `doctor`'s report on
the providers nobody selected.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ai_sdlc.providers.base import Provider, ProviderConfigError
from ai_sdlc.providers.settings import PROVIDER_NAMES as PROVIDER_NAMES


class ProviderSpec(msgspec.Struct, frozen=True):
    """Where a provider lives and what it needs, so it is imported only when chosen."""

    name: str
    #: "package.module:ClassName"
    target: str
    #: The pip extra that brings the provider's client library, if it needs one.
    extra: str | None = None
    #: Top-level modules that extra provides (a ModuleNotFoundError for one means "install it").
    extra_modules: tuple[str, ...] = ()
    #: Modules the provider cannot work without (the claude extra is optional: a `claude`
    #: binary on PATH does as well).
    requires: tuple[str, ...] = ()
    #: The PyPI package the extra brings (for `pipx inject`), when not the extra's name.
    package: str | None = None


PROVIDER_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec("scripted", "ai_sdlc.providers.scripted:ScriptedProvider"),
    ProviderSpec("dry-run", "ai_sdlc.providers.dry_run:DryRunProvider"),
    ProviderSpec(
        "openai",
        "ai_sdlc.providers.openai_provider:OpenAIProvider",
        "openai",
        ("openai",),
        requires=("openai",),
    ),
    ProviderSpec(
        "anthropic",
        "ai_sdlc.providers.anthropic_provider:AnthropicProvider",
        "anthropic",
        ("anthropic",),
        requires=("anthropic",),
    ),
    ProviderSpec(
        "claude",
        "ai_sdlc.providers.claude_provider:ClaudeProvider",
        "claude",
        ("claude_agent_sdk",),
        package="claude-agent-sdk",
    ),
    ProviderSpec("command", "ai_sdlc.providers.command_provider:CommandProvider"),
)

_BY_NAME = {spec.name: spec for spec in PROVIDER_SPECS}
if tuple(_BY_NAME) != PROVIDER_NAMES:  # one list of names: `providers.settings`
    raise RuntimeError("PROVIDER_SPECS must register exactly providers.settings.PROVIDER_NAMES")


def provider_spec(name: str) -> ProviderSpec:
    """The spec registered under `name` (case and surrounding spaces ignored)."""
    key = name.strip().lower()
    spec = _BY_NAME.get(key)
    if spec is None:
        raise ProviderConfigError(
            f"unknown provider {name!r}; valid providers: {', '.join(PROVIDER_NAMES)}",
            hint="set ai.provider in .ai-sdlc/config.yaml (or pass --provider) to one of those",
        )
    return spec


def provider_class(name: str) -> type[Provider]:
    """Import and return the class for `name` (the client library is imported only now)."""
    spec = provider_spec(name)
    module_name, _, class_name = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise _missing_module_error(spec, exc) from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise ProviderConfigError(
            f"the {spec.name} provider is broken: {spec.target} is not a Provider class",
            hint="reinstall ai-sdlc",
        )
    return cls


def install_hint(spec: ProviderSpec) -> str:
    """The command that brings `spec`'s client library (built from the real distribution name)."""
    from ai_sdlc import install_command

    return install_command(spec.extra or spec.name, spec.package)


def missing_package(name: str) -> str | None:
    """The module `name`'s provider needs that cannot be imported here, or None.

    A module that is present but fails to import (a broken or partial install) counts as
    missing: finding it is not enough. Importing costs up to a second, paid only for a
    provider that is about to be used or reported on, and once per process."""
    import sys

    for module in provider_spec(name).requires:
        if module in sys.modules:
            continue
        try:
            importlib.import_module(module)
        except Exception:  # ImportError, or whatever a broken package raises on import
            return module
    return None


def package_versions(name: str) -> tuple[str | None, dict[str, str]]:
    """Like `missing_package`, without importing the client library when its installed
    distribution vouches for it: (the module that cannot be imported, or None; the installed
    version of each module found).

    A module that `find_spec` cannot find is missing. One whose file is listed in the RECORD of
    the distribution installed next to it counts as present, with that distribution's version:
    a report on every provider then costs milliseconds instead of seconds. Anything else (no
    such distribution, or another folder of that name first on sys.path) is decided by
    importing it, as `missing_package` does. A distribution whose own imports fail (one of its
    dependencies removed) is found only by importing it: `missing_package`, which is what a
    command asks for the provider it is about to use."""
    import sys

    versions: dict[str, str] = {}
    spec = provider_spec(name)
    for module in spec.requires:
        loaded = sys.modules.get(module)
        origin = getattr(loaded, "__file__", None) if loaded is not None else _origin(module)
        if origin == "":
            return module, versions
        distribution = spec.package or spec.extra or module
        version = _recorded_version(module, distribution, origin) if origin else None
        if version is None and loaded is None:
            try:
                importlib.import_module(module)
            except Exception:  # ImportError, or whatever a broken package raises on import
                return module, versions
        if version is not None:
            versions[module] = version
    return None, versions


def _origin(module: str) -> str | None:
    """The file top-level `module` would be imported from ("" when there is none to find, None
    when it has no file), found without importing it."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return "" if found is None else found.origin


def _recorded_version(module: str, distribution: str, origin: str) -> str | None:
    """The version of `distribution` when its RECORD lists `origin` as `module`'s file, looked
    for in the folder `module` is found in (where pip puts `<name>-<version>.dist-info`), or
    None."""
    path = Path(origin)
    package = path.parent if path.name.startswith("__init__.") else path
    if package.name.split(".")[0] != module:
        return None
    site = package.parent
    listed = "\n" + path.relative_to(site).as_posix() + ","
    with contextlib.suppress(OSError, ValueError):  # unreadable or not UTF-8: import decides
        for entry in os.listdir(site):
            name, _, version = entry.removesuffix(".dist-info").rpartition("-")
            if not (
                entry.endswith(".dist-info") and _normalized(name) == _normalized(distribution)
            ):
                continue
            if listed in "\n" + (site / entry / "RECORD").read_text(encoding="utf-8"):
                return version or None
    return None


def _normalized(name: str) -> str:
    """A distribution name as compared (PEP 503): case-insensitive, `-`, `_` and `.` alike."""
    return name.lower().replace("-", "_").replace(".", "_")


def missing_package_error(name: str, module: str, source: str) -> ProviderConfigError:
    """Exit 4 for an explicitly chosen provider whose client library is not installed."""
    spec = provider_spec(name)
    return ProviderConfigError(
        f"the {spec.name} provider (chosen by {source}) needs the '{module}' package, which is "
        "not installed",
        hint=install_hint(spec),
    )


def _missing_module_error(spec: ProviderSpec, exc: ModuleNotFoundError) -> ProviderConfigError:
    from ai_sdlc import DISTRIBUTION

    missing = (exc.name or "").split(".")[0]
    if spec.extra is not None and missing in spec.extra_modules:
        return ProviderConfigError(
            f"the {spec.name} provider needs the '{missing}' package, which is not installed",
            hint=install_hint(spec),
        )
    return ProviderConfigError(
        f"the {spec.name} provider cannot be loaded: module {exc.name!r} is missing",
        hint=f"reinstall {DISTRIBUTION} (pip install --force-reinstall {DISTRIBUTION})",
    )


def create_provider(name: str, *, project_root: Path, settings: Mapping[str, Any]) -> Provider:
    """Build the provider `name` for `project_root` with the `ai` config section `settings`."""
    cls = provider_class(name)
    # Every provider takes (project_root, settings); the ABC's signature cannot say so.
    factory: Any = cls
    try:
        provider: Provider = factory(project_root, settings)
    except ModuleNotFoundError as exc:  # a provider importing its client library lazily
        raise _missing_module_error(provider_spec(name), exc) from exc
    return provider
