"""A Ray worker's two ways to the coordinator, with the queue-like ends `worker.Link` uses:
`SocketLink`, a direct connection to the coordinator's `ray_mailbox.Endpoint` (one round trip
per question), and `MailboxLink`, through the coordinator's mailbox actor when this node cannot
reach it directly. Either failing means the coordinator is gone (`StopRequested`)."""

from __future__ import annotations

import contextlib
import pickle
import queue as queue_mod
from typing import Any

from ai_sdlc.workflow.parallel.worker import StopRequested

#: Seconds a worker tries to reach the coordinator directly before using the mailbox actor.
CONNECT_TIMEOUT = 2.0


class MailboxLink:
    """Queue-like ends over the coordinator's mailbox actor: `put` posts (in order, by sequence
    number), `get` waits for the coordinator's answer to this incarnation's question."""

    def __init__(self, mailbox: Any, token: int, life: str) -> None:
        self.mailbox = mailbox
        self.token = token
        self.life = life
        self.seq = 0
        self.posted: list[Any] = []
        self.question: Any = None

    def put(self, item: tuple[int, str, Any]) -> None:
        _token, kind, payload = item
        if kind == "ask":  # sent by `get`, together with the wait for its answer
            self.question = payload
            return
        self.posted.append(self.mailbox.post.remote(self.token, self.life, self.seq, kind, payload))
        self.seq += 1

    def get(self, timeout: float) -> Any:
        import ray

        try:
            if self.question is not None:
                question, self.question = self.question, None
                call = self.mailbox.ask.remote(self.token, self.life, self.seq, question, timeout)
                self.seq += 1
            else:
                call = self.mailbox.wait_answer.remote(self.token, self.life, timeout)
            answer = ray.get(call)
        except (ray.exceptions.RayActorError, ray.exceptions.RaySystemError) as exc:
            raise StopRequested(
                f"the coordinator of the run is gone ({type(exc).__name__})"
            ) from None
        if answer is None:
            raise queue_mod.Empty
        return answer

    def flush(self) -> None:
        """Wait until everything posted is in the mailbox (before the task returns)."""
        import ray

        with contextlib.suppress(Exception):
            ray.get(self.posted, timeout=30)
        self.posted.clear()


def no_delay(conn: Any) -> None:
    """Send each message at once: with Nagle's algorithm a small message written right after
    another waits for the peer's delayed ACK (40 ms on Linux), which is most questions."""
    import socket

    with contextlib.suppress(OSError):
        sock = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        finally:
            sock.close()  # a duplicate of the connection's descriptor: the connection stays


class SocketLink:
    """The same ends over a direct connection to the coordinator (`ray_mailbox.Endpoint`): one
    round trip per question instead of four Ray calls through the mailbox actor, in order by
    construction. A connection that fails or closes means the coordinator is gone."""

    def __init__(self, conn: Any, token: int, life: str) -> None:
        self.conn = conn
        self.token = token
        self.life = life
        self.question: Any = None
        #: Messages sent: the task's result says so, and the coordinator waits for them all.
        self.sent = 0

    @classmethod
    def connect(cls, endpoint: Any, token: int, life: str) -> SocketLink | None:
        """A link, or None when the coordinator cannot be reached directly from this node
        (the mailbox actor is used instead)."""
        import socket
        from multiprocessing.connection import Client

        if endpoint is None:
            return None
        host, port, key = endpoint
        try:  # a quick check first: `Client` itself would wait for the OS's connect timeout
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
            conn = Client((host, port), authkey=key)
        except OSError:
            return None
        no_delay(conn)
        return cls(conn, token, life)

    def _send(self, kind: str, payload: Any) -> None:
        from ray import cloudpickle  # as Ray itself sends them (the runner passes callables)

        message = (self.token, self.life, kind, payload)
        try:
            self.conn.send_bytes(cloudpickle.dumps(message))  # type: ignore[no-untyped-call]
            self.sent += 1
        except OSError as exc:
            raise StopRequested(f"the coordinator of the run is gone ({exc})") from None

    def put(self, item: tuple[int, str, Any]) -> None:
        _token, kind, payload = item
        if kind == "ask":  # sent by `get`, which then waits for the answer
            self.question = payload
            return
        self._send(kind, payload)

    def get(self, timeout: float) -> Any:
        if self.question is not None:
            question, self.question = self.question, None
            self._send("ask", question)
        try:
            if not self.conn.poll(timeout):
                raise queue_mod.Empty
            return pickle.loads(self.conn.recv_bytes())
        except (OSError, EOFError) as exc:
            raise StopRequested(f"the coordinator of the run is gone ({exc!r})") from None

    def flush(self) -> None:
        """Everything sent is in the coordinator's hands once the connection is closed."""
        with contextlib.suppress(OSError):
            self.conn.close()


__all__ = ["CONNECT_TIMEOUT", "MailboxLink", "SocketLink", "no_delay"]
