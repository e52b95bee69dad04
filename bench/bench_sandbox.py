"""The sandbox's cost per process: the same command started with and without the Landlock
sandbox, alternately, in the same run (median of N each).

With every rule a run applies (writes, the credential stores of `DENY_READ` unreadable, no
TCP, a PID namespace of its own). Three kinds of child, through the code paths a run uses:
- a verification step (`run_commands`, as `verify.test`): `true`, and `python -c pass`;
- an agent call (`CommandProvider.execute`, the `command` provider): a small CLI agent that
  reads its prompt on stdin, writes a file in the workspace and answers.

Printed per kind: the median wall time unsandboxed and sandboxed (ms), the difference, the
ratio, the time with the write rules only and what issue 32's rules add to it, and the CPU
time the sandbox adds (this process's and its children's: the figure the machine's load does
not inflate). Target: the sandbox adds <= 50 ms of wall time per process (PASS/FAIL); an
agent call itself takes seconds. What the difference is made of: the launcher (`python -I -S
-c`, a Python start-up with no site-packages), the Landlock rules (a few hundred system calls:
the read allow-list splits $HOME around the denied paths), the namespaces' `unshare` and
`/proc` mount, two more `fork`s and one more `exec`, and the private home's upkeep
(`homes.prepare`: folders and copied logins, per policy). Two floors, in the same run: a bare
`python -I -S -c pass` (the launcher's start-up) and the launcher running `/bin/true` with no
ai-sdlc code around it.

Then `worktree.setup` (`uv venv` + `uv pip install` of `--package`, through `run_commands` under
the sandbox) cold and warm, with ai-sdlc's private caches (UV_CACHE_DIR in its state folder,
`UV_LINK_MODE=copy`) against the user's own cache made writable (what children got before issue
32: `~/.cache` writable, uv's default hard links), each in a fresh workspace, in the same run;
and the hard-link check (`links.check`) of the warm workspace. Needs uv (`--uv`, on PATH, or the
test suite's copy) and its package index; skipped without them.

    python bench/bench_sandbox.py [--runs 20] [--setup-runs 3] [--package rich]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ai_sdlc.providers.base import Access, Phase, ProviderRequest
from ai_sdlc.providers.command_provider import CommandProvider
from ai_sdlc.sandbox import homes, landlock, links
from ai_sdlc.sandbox.backend import LandlockBackend
from ai_sdlc.sandbox.homes import HomeSources
from ai_sdlc.sandbox.policy import DENY_READ, SandboxPolicy
from ai_sdlc.verify import run_commands

#: Added wall time per sandboxed process, in seconds.
TARGET = 0.050
AGENT = """
import sys
prompt = sys.stdin.read()
with open("answer.txt", "w") as fh:
    fh.write(prompt[:100])
print("implemented: " + prompt.splitlines()[0])
"""


def timed(fn: Callable[[], object], times: list[float], cpu: list[float] | None = None) -> None:
    """Run `fn` once and append its wall time in ms (and to `cpu` the CPU time, in ms, of
    this process and the children it waited for: what the machine's load does not inflate)."""
    before = _cpu()
    start = time.perf_counter()
    fn()
    times.append((time.perf_counter() - start) * 1000)
    if cpu is not None:
        cpu.append((_cpu() - before) * 1000)


def _cpu() -> float:
    me, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def verification(workspace: Path, line: str, policy: SandboxPolicy | None) -> Callable[[], None]:
    def run() -> None:
        result = run_commands([("test", line)], cwd=workspace, timeout=60, sandbox=policy)
        assert result.passed, result.failure_output

    return run


def agent_call(workspace: Path, script: Path, policy: SandboxPolicy | None) -> Callable[[], None]:
    provider = CommandProvider(
        workspace,
        {"command": {"template": [sys.executable, str(script)], "prompt_via": "stdin"}},
        environ=dict(os.environ),
    )
    request = ProviderRequest(
        phase=Phase.IMPLEMENT,
        prompt="Add a greeting\n\nWrite answer.txt.",
        system_prompt="",
        workspace=workspace,
        access=Access.EDIT,
        timeout=60,
        story_id="S-0001",
        sandbox=policy,
    )

    def run() -> None:
        result = provider.execute(request)
        assert result.text.startswith("implemented"), result.text

    return run


def floor(workspace: Path, writable: tuple[str, ...], runs: int) -> None:
    """What the added time is made of, in the same run: a bare `python -I -S -c pass` (the
    launcher's own start-up, which the machine's load sets), and the launcher alone running
    `/bin/true` with the write rules, without ai-sdlc's code around it."""
    import subprocess

    bare = [sys.executable, "-I", "-S", "-c", "pass"]
    launched = LandlockBackend().wrap(["/bin/true", "true"], writable)
    times: dict[str, list[float]] = {"bare": [], "launched": [], "true": []}
    for _ in range(runs):
        for name, argv in (("bare", bare), ("launched", launched), ("true", ["/bin/true"])):
            timed(lambda a=argv: subprocess.run(a, cwd=workspace, check=True), times[name])
    start, launch, true = (statistics.median(times[n]) for n in ("bare", "launched", "true"))
    print(f"{'floor: `python -I -S -c pass`':32} {start:7.1f}ms (the launcher's start-up)")
    added = f"{launch - true:+.1f}ms on `true`"
    print(f"{'floor: launcher + `true` alone':32} {launch:7.1f}ms ({added})")


def find_uv(given: str | None) -> str | None:
    import shutil

    if given:
        return given
    cached = Path.home() / ".cache" / "ai-sdlc-tests" / "tools" / "uv-0.13.9" / "venv" / "bin"
    return shutil.which("uv") or shutil.which("uv", path=str(cached))


def _setup_policy(label: str, sources: HomeSources, home: Path, ws: Path) -> SandboxPolicy:
    backend = LandlockBackend()
    if label.startswith("private"):
        private = homes.prepare(sources, ws)
        return SandboxPolicy(backend, (str(ws), *private.writable), private.env)
    cache = str(home / ".cache")
    return SandboxPolicy(backend, (str(ws), cache), (("UV_CACHE_DIR", cache + "/uv"),))


def setup_bench(uv: str, package: str, runs: int) -> None:
    """worktree.setup cold and warm: private caches against the user's (see the docstring)."""
    steps = [("setup", f"{uv} venv -q .venv"), ("setup", f"{uv} pip install -q {package}")]
    print(f"\nworktree.setup: `uv venv` + `uv pip install {package}` (median of {runs} warm)")
    print(f"{'':32} {'cold':>9} {'warm':>9}")
    for label in ("private caches (copy)", "user's cache (hard links)"):
        with tempfile.TemporaryDirectory(prefix="bench-setup-") as tmp:
            home = Path(tmp) / "home"
            (home / ".cache").mkdir(parents=True)
            sources = HomeSources.from_env(
                {"HOME": str(home), "AI_SDLC_STATE_HOME": str(Path(tmp) / "state")}, home
            )

            times: list[float] = []
            last = Path(tmp)
            for n in range(runs + 1):
                ws = Path(tmp) / f"ws{n}"
                ws.mkdir()
                env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
                env["VIRTUAL_ENV"] = str(ws / ".venv")
                policy = _setup_policy(label, sources, home, ws)
                start = time.perf_counter()
                result = run_commands(steps, cwd=ws, timeout=600, env=env, sandbox=policy)
                times.append((time.perf_counter() - start) * 1000)
                if not result.passed:
                    print(f"{label:32} setup failed: {result.failure_output[-300:]}")
                    return
                last = ws
            cold, warm = times[0], statistics.median(times[1:])
            print(f"{label:32} {cold:7.0f}ms {warm:7.0f}ms")
            if label.startswith("private"):
                private = homes.prepare(sources, last)
                start = time.perf_counter()
                links.check(last, [], list(private.writable), last)
                took = (time.perf_counter() - start) * 1000
                files = sum(len(f) for _, _, f in os.walk(last))
                print(f"{'hard-link check of that worktree':32} {took:7.1f}ms ({files} files)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--setup-runs", type=int, default=3)
    parser.add_argument("--package", default="rich")
    parser.add_argument("--uv", default=None)
    args = parser.parse_args()
    try:
        abi = landlock.abi_version()
    except OSError as exc:
        print(f"no Landlock on this kernel ({exc.strerror}): nothing to measure")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        script = Path(tmp) / "agent.py"
        script.write_text(AGENT)
        sources = HomeSources.from_env(
            {"HOME": str(Path.home()), "AI_SDLC_STATE_HOME": str(Path(tmp) / "state")},
            Path.home(),
        )
        private = homes.prepare(sources, workspace)
        # The rules a run applies: writes, the credential stores unreadable, no TCP (the
        # verify step's; an agent's adds its egress proxy, a thread in this process), and a PID
        # namespace of its own.
        home = Path.home()
        deny = (*(str(home / raw[2:]) for raw in DENY_READ), *sources.logins())
        writable = (str(workspace), *private.writable)
        policy = SandboxPolicy(
            LandlockBackend(),
            writable,
            private.env,
            private.runs,
            deny_read=deny,
            net_rules=True,
            network=(),
        ).for_step("verify")
        writes_only = SandboxPolicy(
            LandlockBackend(), writable, private.env, private.runs, pidns=False
        )
        kinds = {
            "verify `true`": lambda p: verification(workspace, "true", p),
            "verify `python -c pass`": lambda p: verification(
                workspace, f"{sys.executable} -c pass", p
            ),
            "agent call (command provider)": lambda p: agent_call(workspace, script, p),
        }
        print(f"Sandbox cost per process (Landlock ABI {abi}, median of {args.runs}, alternating)")
        print(
            f"{'':32} {'plain':>9} {'sandboxed':>10} {'added':>9} {'ratio':>6} "
            f"{'writes only':>12} {'new rules':>10} {'CPU added':>10}"
        )
        worst = 0.0
        for name, make in kinds.items():
            plain_fn, boxed_fn, writes_fn = make(None), make(policy), make(writes_only)
            plain_fn(), boxed_fn(), writes_fn()  # warm up: caches, imports
            plain: list[float] = []
            boxed: list[float] = []
            writes: list[float] = []
            plain_cpu: list[float] = []
            boxed_cpu: list[float] = []
            for _ in range(args.runs):
                timed(plain_fn, plain, plain_cpu)
                timed(boxed_fn, boxed, boxed_cpu)
                timed(writes_fn, writes)
            p, b = statistics.median(plain), statistics.median(boxed)
            w = statistics.median(writes)
            cpu = statistics.median(boxed_cpu) - statistics.median(plain_cpu)
            worst = max(worst, b - p)
            print(
                f"{name:32} {p:7.1f}ms {b:8.1f}ms {b - p:+7.1f}ms {b / p:5.2f}x "
                f"{w:10.1f}ms {b - w:+8.1f}ms {cpu:+8.1f}ms"
            )
        floor(workspace, writable, args.runs)
        verdict = "PASS" if worst <= TARGET * 1000 else "FAIL"
        print(
            f"most added per process: {worst:.1f} ms (target <= {TARGET * 1000:.0f} ms): {verdict}"
        )
        print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    uv = find_uv(args.uv)
    if uv is None:
        print("\nworktree.setup: no uv found (--uv): not measured")
    else:
        setup_bench(uv, args.package, args.setup_runs)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
