"""The agents' way out: a local HTTP proxy that reaches only the provider's API hosts.

A CLI agent needs its provider's API and nothing else; a hostile one would send the code, or
what it read, anywhere. Landlock (ABI 4) grants TCP connect per port, not per host, so the
agent may connect only to this proxy's port on 127.0.0.1, and is given `HTTPS_PROXY` and
`HTTP_PROXY` pointing at it (Claude Code, Codex, Gemini CLI and Aider's HTTP clients honour
them). The proxy, running in ai-sdlc outside the sandbox, answers `CONNECT host:port` (HTTPS,
relayed as bytes: the proxy never sees the traffic) and plain HTTP requests in absolute form,
for the (host, port) pairs of its allow-list only; anything else gets `403` and no connection.
The anchors do the same: Claude Code's sandbox sends the network through a proxy with a domain
allow-list. One proxy per agent call: it lives as long as the call (`agent_egress`).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import msgspec

if TYPE_CHECKING:
    from ai_sdlc.sandbox.policy import SandboxPolicy

#: The environment variables HTTP clients read their proxy from (both spellings); the
#: bypass lists are removed, so that nothing goes around the proxy (it would be refused).
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
BYPASS_VARS = ("NO_PROXY", "no_proxy")
_MAX_HEAD = 64 * 1024
_CONNECT_TIMEOUT = 30.0


def allowed_hosts(urls: Iterable[str]) -> frozenset[tuple[str, int]]:
    """(host, port) of each http(s) URL (a bare host means HTTPS on 443)."""
    found: set[tuple[str, int]] = set()
    for url in urls:
        parts = urlsplit(url if "://" in url else f"https://{url}")
        if parts.hostname:
            default = 80 if parts.scheme == "http" else 443
            found.add((parts.hostname.lower(), parts.port or default))
    return frozenset(found)


class EgressProxy:
    """A CONNECT and plain-HTTP proxy on 127.0.0.1 with a (host, port) allow-list; `refused`
    keeps what it turned away, for the record."""

    def __init__(self, allowed: frozenset[tuple[str, int]]) -> None:
        self.allowed = allowed
        self.refused: list[str] = []
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port: int = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="egress-proxy", daemon=True)

    def __enter__(self) -> EgressProxy:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=5)

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        return dict.fromkeys(PROXY_VARS, self.url())

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        with client:
            head, rest = _read_head(client)
            if head is None:
                return
            lines = head.split(b"\r\n")
            try:
                method, target, version = lines[0].decode("latin-1").split(" ", 2)
            except ValueError:
                return
            if method.upper() == "CONNECT":
                host, _, port_text = target.rpartition(":")
                path = ""
            else:
                parts = urlsplit(target)
                host, port_text = parts.hostname or "", str(parts.port or 80)
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                if parts.scheme != "http":
                    host = ""
            host = host.strip("[]").lower()
            try:
                port = int(port_text)
            except ValueError:
                port = -1
            if (host, port) not in self.allowed:
                self.refused.append(f"{host}:{port}")
                _answer(client, "403 Forbidden", f"ai-sdlc: {host}:{port} is not allowed\n")
                return
            try:
                upstream = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT)
            except OSError as exc:
                _answer(client, "502 Bad Gateway", f"ai-sdlc: {host}:{port}: {exc}\n")
                return
            with upstream:
                upstream.settimeout(None)
                if method.upper() == "CONNECT":
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    if rest:
                        upstream.sendall(rest)
                else:
                    kept = [
                        line
                        for line in lines[1:]
                        if line
                        and not line.lower().startswith((b"proxy-", b"connection:", b"keep-alive:"))
                    ]
                    first = f"{method} {path} {version}".encode("latin-1")
                    upstream.sendall(
                        b"\r\n".join([first, *kept, b"Connection: close", b"", b""]) + rest
                    )
                _relay(client, upstream)


def _read_head(client: socket.socket) -> tuple[bytes | None, bytes]:
    """The request head (up to the blank line) and whatever came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > _MAX_HEAD:
            return None, b""
        try:
            chunk = client.recv(65536)
        except OSError:
            return None, b""
        if not chunk:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _answer(client: socket.socket, status: str, body: str) -> None:
    data = body.encode()
    with contextlib.suppress(OSError):
        client.sendall(
            f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n".encode()
            + data
        )


def _relay(one: socket.socket, other: socket.socket) -> None:
    """Copy bytes both ways until both sides are done."""
    with selectors.DefaultSelector() as selector:
        selector.register(one, selectors.EVENT_READ, other)
        selector.register(other, selectors.EVENT_READ, one)
        open_ends = 2
        while open_ends:
            for key, _ in selector.select():
                source = key.fileobj
                assert isinstance(source, socket.socket)
                try:
                    data = source.recv(65536)
                except OSError:
                    data = b""
                if data:
                    with contextlib.suppress(OSError):
                        key.data.sendall(data)
                    continue
                selector.unregister(source)
                open_ends -= 1
                with contextlib.suppress(OSError):
                    key.data.shutdown(socket.SHUT_WR)


class Egress(msgspec.Struct, frozen=True):
    """An agent call's sandbox and the environment variables that route it (the proxy's)."""

    sandbox: SandboxPolicy | None
    env: dict[str, str]

    def apply(self, environ: Mapping[str, str]) -> dict[str, str]:
        """`environ` routed through the proxy (no bypass list)."""
        if not self.env:
            return dict(environ)
        routed = {k: v for k, v in environ.items() if k not in BYPASS_VARS}
        routed.update(self.env)
        return routed


@contextlib.contextmanager
def agent_egress(sandbox: SandboxPolicy | None, urls: Iterable[str]) -> Iterator[Egress]:
    """For one CLI agent call: when `sandbox.network` keeps the agents off the open network
    (and the kernel can), a proxy allowing only `urls`' hosts, and the sandbox that lets the
    agent connect to nothing but it. Else the sandbox as it is (for the agents step)."""
    if sandbox is None or "agents" in sandbox.network or not sandbox.net_rules:
        yield Egress(None if sandbox is None else sandbox.for_step("agents"), {})
        return
    import msgspec.structs

    with EgressProxy(allowed_hosts(urls)) as proxy:
        confined = msgspec.structs.replace(sandbox, connect_ports=(proxy.port,))
        yield Egress(confined, proxy.environment())
