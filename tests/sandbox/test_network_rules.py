"""Issue 32, "the network only where a step needs it", through the real CLI.

A `command` agent stand-in reaches its provider's API (a fake one on 127.0.0.1, named by
`OPENAI_BASE_URL`) through ai-sdlc's egress proxy, and is refused another host, through the
proxy (403) and directly (Landlock allows it to connect to the proxy's port only). A verify
command gets no TCP at all, unless `sandbox.network` names `verify`. Widening `sandbox.network`
from the environment is refused like `sandbox.enabled: false`.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ai_sdlc.sandbox import landlock
from tests.conftest import run_cli
from tests.support.git_support import git, git_env, make_repo  # noqa: F401 (fixture)

try:
    ABI = landlock.abi_version()
except OSError:  # pragma: no cover - the CI and dev kernels have Landlock
    ABI = 0
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("git_env"),
    pytest.mark.skipif(ABI < landlock.NET_ABI, reason="needs Landlock ABI 4 (network rules)"),
]

#: `agent.py REPORTS API OTHER PHASE`: GET API/v1/models (through the proxy the environment
#: names), GET OTHER/steal (the same way), a `CONNECT` tunnel to each (as HTTPS clients do;
#: a GET inside the tunnel), then a direct TCP connection to OTHER's port; each outcome is in a
#: line of REPORTS/agent.jsonl.
AGENT = r"""
import json, os, socket, sys, urllib.error, urllib.request
from urllib.parse import urlsplit
reports, api, other, phase = sys.argv[1:5]
record = {"phase": phase, "proxy": os.environ.get("HTTPS_PROXY")}
for name, url in (("api", api + "/v1/models"), ("other", other + "/steal")):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            record[name] = answer.read().decode()
    except urllib.error.HTTPError as exc:
        record[name] = f"HTTP {exc.code}"
    except OSError as exc:
        record[name] = "denied: " + str(exc)
proxy = urlsplit(os.environ.get("HTTPS_PROXY") or "http://127.0.0.1:1")
for name, url in (("api_tunnel", api), ("other_tunnel", other)):
    target = urlsplit(url).netloc
    try:
        with socket.create_connection((proxy.hostname, proxy.port), timeout=10) as conn:
            conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            answer = conn.recv(4096).decode()
            if " 200 " in answer.split("\r\n")[0]:
                conn.sendall(f"GET /tunnel HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
                answer = b"".join(iter(lambda: conn.recv(4096), b"")).decode()
            record[name] = answer.split("\r\n")[0] + " " + answer.rsplit("\n", 1)[-1]
    except OSError as exc:
        record[name] = "denied: " + str(exc)
try:
    socket.create_connection(("127.0.0.1", urlsplit(other).port), timeout=5).close()
    record["direct"] = "connected"
except OSError as exc:
    record["direct"] = "denied: " + (exc.strerror or str(exc))
with open(os.path.join(reports, "agent.jsonl"), "a") as fh:
    fh.write(json.dumps(record) + "\n")
print(phase + " done\n\nDECISION: APPROVED" if phase in ("refine", "review") else "## " + phase)
"""


class Server:
    """An HTTP server on 127.0.0.1 that answers every GET with its name and logs the paths."""

    def __init__(self, name: str) -> None:
        self.paths: list[str] = []
        paths = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                paths.append(self.path)
                body = name.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    api, other = Server("fake-openai"), Server("exfiltration")
    yield api, other
    api.close()
    other.close()


def project(tmp_path: Path, api: Server, other: Server, verify: str) -> tuple[Path, Path]:
    root = make_repo(tmp_path, remote=False).root
    reports = tmp_path / "reports"
    reports.mkdir()
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    agent = [sys.executable, str(script), str(reports), api.url, other.url, "{phase}"]
    (root / ".ai-sdlc" / "config.yaml").write_text(
        f"ai:\n  provider: command\n  command:\n    template: {json.dumps(agent)}\n"
        f"verify:\n  test: {json.dumps(verify)}\n"
        "limits:\n  implementation_retries: 0\n"
        f"sandbox:\n  writable: [{json.dumps(str(reports))}]\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "config")
    return root, reports


def env_for(reports: Path, api: Server, **more: str) -> dict[str, str]:
    return {
        "AI_SDLC_PROVIDER": "command",
        "OPENAI_BASE_URL": api.url,
        "OPENAI_API_KEY": "sk-test-fake-key-123",
        **more,
    }


#: A verify command that tries a TCP connection to PORT and writes the outcome to FILE.
VERIFY = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5).close()\n"
    "    outcome = 'connected'\n"
    "except OSError as exc:\n"
    "    outcome = 'denied: ' + (exc.strerror or str(exc))\n"
    "open(sys.argv[2], 'a').write(outcome + '\\n')\n"
    "print('FAILED tests/test_calc.py::test_multiply - assert 9 == 20')\n"  # a failing test
    "sys.exit(1)\n"
)


def test_an_agent_reaches_its_api_through_the_proxy_and_nothing_else(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    api, other = servers
    port = other.url.rsplit(":", 1)[1]
    tried = tmp_path / "reports" / "verify.txt"
    verify = shlex.join([sys.executable, "-c", VERIFY, port, str(tried)])
    root, reports = project(tmp_path, api, other, verify)
    env = env_for(reports, api)
    assert run_cli(root, "add", "Add multiply", env=env).returncode == 0
    result = run_cli(root, "run", "S-0001", env=env)
    assert result.returncode == 5, result.output  # blocked: verification fails
    records = [json.loads(line) for line in (reports / "agent.jsonl").read_text().splitlines()]
    assert {r["phase"] for r in records} >= {"refine", "plan", "implement"}, records
    for record in records:
        assert record["proxy"].startswith("http://127.0.0.1:"), record
        assert record["api"] == "fake-openai", record
        assert record["other"] == "HTTP 403", record
        assert record["api_tunnel"] == "HTTP/1.0 200 OK fake-openai", record
        assert record["other_tunnel"].startswith("HTTP/1.1 403 Forbidden"), record
        assert record["direct"].startswith("denied"), record
    assert other.paths == [] and len(api.paths) == 2 * len(records)
    # verification: no TCP at all
    assert set(tried.read_text().splitlines()) == {"denied: Permission denied"}


def test_sandbox_network_opens_a_step_and_the_environment_cannot(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    api, other = servers
    port = other.url.rsplit(":", 1)[1]
    tried = tmp_path / "reports" / "verify.txt"
    verify = shlex.join([sys.executable, "-c", VERIFY, port, str(tried)])
    root, reports = project(tmp_path, api, other, verify)
    env = env_for(reports, api)
    assert run_cli(root, "add", "Add multiply", env=env).returncode == 0
    wider = {**env, "AI_SDLC_SANDBOX__NETWORK": '["setup", "verify"]'}
    refused = run_cli(root, "run", "S-0001", env=wider)
    assert refused.returncode == 3, refused.output
    assert "would loosen the guardrail sandbox.network" in " ".join(refused.output.split())
    assert not tried.exists()
    opened = run_cli(root, "config", "sandbox.network", '["setup", "verify", "agents"]', env=env)
    assert opened.returncode == 0, opened.output
    result = run_cli(root, "run", "S-0001", env=env)
    assert result.returncode == 5, result.output
    assert set(tried.read_text().splitlines()) == {"connected"}
    records = [json.loads(line) for line in (reports / "agent.jsonl").read_text().splitlines()]
    assert all(r["proxy"] is None and r["direct"] == "connected" for r in records), records
