"""What `verify.held` holds, precisely, on real git repositories: the parts of shared files that
define the test run change → held; the rest of those files (dependencies, other scripts,
metadata) is the story's. Program-specific files are held only when the verify command runs
that program."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ai_sdlc.verify.held import describe, held_changes
from tests.support.git_support import git, git_env

__all__ = ["git_env"]

pytestmark = pytest.mark.usefixtures("git_env")

PACKAGE = {
    "name": "x",
    "scripts": {"test": "npm run unit", "unit": "uvu test", "build": "tsc", "lint": "eslint ."},
    "dependencies": {"a": "1.0.0"},
}
CARGO = '[package]\nname = "x"\nversion = "0.1.0"\n\n[dependencies]\nserde = "1"\n'
GO_MOD = "module example.com/x\n\ngo 1.24\n\ntool golang.org/x/tools/cmd/stringer\n"
MAIN_TEST = 'package x\n\nimport "testing"\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n}\n'


def repo(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root, git(root, "rev-parse", "HEAD").strip()


def found(root: Path, base: str, *commands: str) -> list[str]:
    return [describe(h) for h in held_changes(root, base, [("test", c) for c in commands])]


def test_package_json_scripts_the_verify_command_runs_are_held_the_rest_is_not(
    tmp_path: Path,
) -> None:
    root, base = repo(tmp_path, {"package.json": json.dumps(PACKAGE)})
    changed = json.loads(json.dumps(PACKAGE))
    changed["dependencies"]["b"] = "2.0.0"  # a story's new dependency
    changed["scripts"]["build"] = "tsc -p ."  # a script the tests do not run
    changed["scripts"]["lint"] = "eslint src"
    (root / "package.json").write_text(json.dumps(changed))
    assert found(root, base, "npm test") == []

    changed["scripts"]["unit"] = "uvu test add"  # named by `test`: runs under npm test
    changed["scripts"]["pretest"] = "true"  # npm runs it before `test`
    (root / "package.json").write_text(json.dumps(changed))
    assert found(root, base, "npm test") == [
        "package.json scripts.pretest",
        "package.json scripts.unit",
    ]
    # the scripts held follow the verify command
    assert found(root, base, "npm run lint") == ["package.json scripts.lint"]


def test_package_json_name_is_held_its_exports_are_the_storys(tmp_path: Path) -> None:
    """Node resolves a package's imports of its own name from its `exports` before
    `node_modules`: renamed `uvu`, the package would serve `uvu/assert` itself."""
    root, base = repo(tmp_path, {"package.json": json.dumps(PACKAGE)})
    changed = json.loads(json.dumps(PACKAGE))
    changed["exports"] = {".": "./index.js", "./mul": "./mul.js"}  # the story's API
    (root / "package.json").write_text(json.dumps(changed))
    assert found(root, base, "npm test") == []

    changed["name"] = "uvu"
    (root / "package.json").write_text(json.dumps(changed))
    assert found(root, base, "npm test") == ["package.json name"]


def test_cargo_harness_settings_and_go_tool_lines_are_held_dependencies_are_not(
    tmp_path: Path,
) -> None:
    root, base = repo(tmp_path, {"Cargo.toml": CARGO, "go.mod": GO_MOD, "main_test.go": MAIN_TEST})
    (root / "Cargo.toml").write_text(CARGO + 'rand = "0.8"\n')
    (root / "go.mod").write_text(GO_MOD + "\nrequire golang.org/x/text v0.3.0\n")
    assert found(root, base, "cargo test") == []

    (root / "Cargo.toml").write_text(CARGO + '\n[[test]]\nname = "it"\nharness = false\n')
    (root / "go.mod").write_text(GO_MOD.replace("stringer", "fake"))
    (root / "main_test.go").write_text(MAIN_TEST.replace("m.Run()", "os.Exit(0)"))
    (root / "init_test.go").write_text("package x\n\nfunc init() {\n\tprintln()\n}\n")
    (root / "more_test.go").write_text(
        'package x\n\nimport "testing"\n\nfunc TestMore(t *testing.T) {}\n'
    )
    assert found(root, base, "cargo test") == [
        "Cargo.toml [[test]]",
        "go.mod tool",
        "main_test.go func TestMain",
        "init_test.go func init",
    ]


def test_program_files_are_held_only_when_the_verify_command_runs_the_program(
    tmp_path: Path,
) -> None:
    root, base = repo(tmp_path, {"Makefile": "test:\n\tpytest\n", "tox.ini": "[tox]\n"})
    (root / "Makefile").write_text("test:\n\ttrue\n")
    (root / "tox.ini").write_text("[tox]\nenvlist = py\n")
    assert found(root, base, "python -m pytest") == []
    assert found(root, base, "make test") == ["Makefile"]
    assert found(root, base, "tox -e py") == ["tox.ini"]


def test_test_configuration_git_ignores_is_held(tmp_path: Path) -> None:
    """A new conftest.py (or sitecustomize.py) hidden by .gitignore is not in git's view of the
    change (`verify.protected` never sees it) but pytest and Python still load it."""
    root, base = repo(tmp_path, {"src/calc/__init__.py": "", ".gitignore": "__pycache__/\n"})
    (root / "__pycache__").mkdir()  # ignored, and harmless
    (root / ".gitignore").write_text("__pycache__/\nconftest.py\nsitecustomize.py\n")
    (root / "conftest.py").write_text("")
    (root / "src" / "sitecustomize.py").write_text("")
    assert found(root, base, "python -m pytest") == [
        "conftest.py (test configuration git ignores)",
        "src/sitecustomize.py (test configuration git ignores)",
    ]


def test_modules_shadowing_the_runner_are_held_where_python_imports_from(tmp_path: Path) -> None:
    root, base = repo(tmp_path, {"src/calc/__init__.py": "", ".gitignore": "hidden/\n"})
    (root / "src" / "pluggy").mkdir()
    (root / "src" / "pluggy" / "__init__.py").write_text("")
    (root / "mytool.py").write_text("")  # the module the verify command runs with -m
    (root / "tests").mkdir()
    (root / "tests" / "pytest.py").write_text("")  # not a source root: not held
    (root / "src" / "calc" / "pytest.py").write_text("")  # calc.pytest: shadows nothing
    (root / "pytest_fake.py").write_text("")
    assert found(root, base, "python -m mytool --check") == [
        "mytool.py (shadows the test runner's module mytool)",
        "pytest_fake.py (shadows the test runner's module pytest_fake)",
        "src/pluggy/__init__.py (shadows the test runner's module pluggy)",
    ]


def test_packages_pytest_imports_are_held_in_src_too(tmp_path: Path) -> None:
    """pytest imports `pygments` at start (and `packaging` when it checks versions); an
    editable install puts `src/` before the installed packages, so `src/pygments/` runs
    inside the runner."""
    root, base = repo(tmp_path, {"src/calc/__init__.py": ""})
    for name in ("pygments", "packaging"):
        (root / "src" / name).mkdir()
        (root / "src" / name / "__init__.py").write_text("")
    assert found(root, base, "python -m pytest") == [
        "src/packaging/__init__.py (shadows the test runner's module packaging)",
        "src/pygments/__init__.py (shadows the test runner's module pygments)",
    ]

    # the `pygments` project itself: its own package is the story's to change
    (tmp_path / "own").mkdir()
    root, base = repo(tmp_path / "own", {"src/pygments/__init__.py": ""})
    (root / "src" / "pygments" / "__init__.py").write_text("__version__ = '3'\n")
    (root / "src" / "pygments" / "lexer.py").write_text("")
    assert found(root, base, "python -m pytest") == []


def test_babel_config_is_held_wherever_and_however_it_is_written(tmp_path: Path) -> None:
    """Jest compiles the tests with the project's Babel config: a plugin can strip every
    `expect`, so a new or changed one, or package.json's `babel` key, is held."""
    root, base = repo(tmp_path, {"package.json": json.dumps(PACKAGE), ".babelrc": "{}"})
    (root / "babel.config.js").write_text("module.exports = { plugins: [] };\n")
    (root / ".babelrc").write_text('{"plugins": ["strip"]}')
    changed = {**PACKAGE, "babel": {"plugins": ["strip"]}}
    (root / "package.json").write_text(json.dumps(changed))
    assert sorted(found(root, base, "npm test")) == [
        ".babelrc",
        "babel.config.js",
        "package.json babel",
    ]


def test_a_git_ignored_node_modules_below_the_project_is_held_unless_a_base_package_owns_it(
    tmp_path: Path,
) -> None:
    """`node_modules/` in `.gitignore` hides every nested one from the diff; Node finds
    `test/node_modules/uvu` before the installed uvu. The project's own `node_modules/` is the
    environment digest's, and a workspace package of the base (its `package.json` beside
    it) has one of its own."""
    root, base = repo(
        tmp_path,
        {
            ".gitignore": "node_modules/\n",
            "package.json": json.dumps(PACKAGE),
            "packages/a/package.json": "{}",
        },
    )
    for folder in ("node_modules/uvu", "packages/a/node_modules/x", "test/node_modules/uvu"):
        (root / folder).mkdir(parents=True)
        (root / folder / "index.js").write_text("module.exports = {};\n")
    assert found(root, base, "npm test") == [
        "test/node_modules/ (a node_modules folder, loaded before the installed packages)"
    ]


def test_entry_points_where_python_imports_from_are_held(tmp_path: Path) -> None:
    """pytest loads every `pytest11` plugin the distributions on `sys.path` name, and an
    editable install puts `src/` there: a `*.dist-info` or `*.egg-info` the change adds there
    registers a plugin that runs before any test. An install's own git-ignored egg-info that
    names no pytest plugin is not held."""
    root, base = repo(tmp_path, {".gitignore": "*.egg-info/\n", "src/calc/__init__.py": ""})
    own = root / "src" / "calc.egg-info"
    own.mkdir()
    (own / "entry_points.txt").write_text("[console_scripts]\ncalc = calc:main\n")
    assert found(root, base, "python -m pytest") == []

    (root / "src" / "forge-1.0.dist-info").mkdir()
    (root / "src" / "forge-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\nf = f\n")
    (root / "src" / "x.egg-info").mkdir()
    (root / "src" / "x.egg-info" / "entry_points.txt").write_text("[pytest11]\nx = x\n")
    why = " (entry points where Python imports from: pytest loads the plugins they name)"
    assert found(root, base, "python -m pytest") == [
        "src/forge-1.0.dist-info/entry_points.txt" + why,
        "src/x.egg-info/entry_points.txt" + why,
    ]
