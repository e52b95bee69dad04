"""A Go build cache warmed once per machine, copied into a test's own ai-sdlc state home.

Why: the product gives every child one Go build cache (`<state>/caches/go-build`,
`sandbox/homes.py`), and a test process's state home starts empty, so its first `go test`
compiles and vets the standard library's test dependencies: about 1.9 s of CPU of a Go
layout's few seconds, paid by every test process that runs one. Go's cache is content-addressed
(a key is the hash of every input: toolchain, flags, sources), so a warm copy changes no
result, only what is compiled again. The warm cache lives beside the real agent CLIs
(`tests/e2e/realcli/install.py`'s cache folder), complete once its `.ready` exists, a file lock
serialising xdist workers; each test gets a copy of its own (the agents may write there)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.e2e.realcli.install import once_per_machine


def _go_version(go: str) -> str:
    done = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def warm_go_build(go: str, build: Callable[[Path], None]) -> Path:
    """The warmed cache folder: `go test -v ./...` (vet included, as the product runs it) of the
    module `build(folder)` writes, once per Go version."""

    def warm(folder: Path) -> None:
        module = folder / "module"
        module.mkdir(parents=True)
        build(module)
        env = {**os.environ, "GOCACHE": str(folder / "cache"), "GOENV": "off", "GOFLAGS": ""}
        done = subprocess.run(
            [go, "test", "-v", "./..."], cwd=module, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        shutil.rmtree(module)

    return once_per_machine(f"go-build-{_go_version(go)}", warm) / "cache"


def state_home_with_go_build(state: Path, warm: Path) -> Path:
    """`state` (an ai-sdlc state home of the test's own) holding a copy of the warm cache where
    the product points every child's GOCACHE."""
    shutil.copytree(warm, state / "caches" / "go-build")
    return state
