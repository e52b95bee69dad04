"""How a Ray run's workers reach the coordinator: the `Mailbox` actor (always there; owned by
the coordinator, so it dies with it) and the direct `Endpoint` (a socket per worker, used when
the worker can reach this node). Both hand each worker's messages over in its sending order."""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import threading
from typing import Any

from ai_sdlc.workflow.parallel.ray_links import no_delay

#: Takes the pump keeps waiting in the mailbox (see `Mailbox`).
TAKES_IN_FLIGHT = 2


class Mailbox:
    """The coordinator's mailbox (an async Ray actor owned by the coordinator, so it dies with
    it): workers post events, questions and hellos; the coordinator takes them in each worker's
    posting order (sequence numbers: actor calls may run out of order) and answers.

    The coordinator keeps `TAKES_IN_FLIGHT` takes waiting here, so a post is on its way back
    at once, never waiting for the coordinator to send its next take; each take returns a
    numbered batch (numbers in the order batches left here), which the coordinator applies in
    that order."""

    def __init__(self) -> None:
        self.items: list[tuple[int, str, str, Any]] = []
        self.batches = 0
        self.expected: dict[tuple[int, str], int] = {}
        self.held: dict[tuple[int, str, int], tuple[str, Any]] = {}
        self.answers: dict[tuple[int, str], asyncio.Queue[Any]] = {}
        self.arrived: asyncio.Event | None = None

    def _signal(self) -> asyncio.Event:
        if self.arrived is None:
            self.arrived = asyncio.Event()
        return self.arrived

    async def post(self, token: int, life: str, seq: int, kind: str, payload: Any) -> None:
        key = (token, life)
        self.held[(token, life, seq)] = (kind, payload)
        nxt = self.expected.get(key, 0)
        while (token, life, nxt) in self.held:
            k, p = self.held.pop((token, life, nxt))
            self.items.append((token, life, k, p))
            nxt += 1
        self.expected[key] = nxt
        self._signal().set()

    async def take(self, timeout: float) -> tuple[int, list[tuple[int, str, str, Any]]]:
        """The next batch (possibly empty after `timeout`), and its number."""
        signal = self._signal()
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.items:  # another waiting take may have taken what woke this one
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            signal.clear()
            try:
                await asyncio.wait_for(signal.wait(), remaining)
            except TimeoutError:
                break
        items, self.items = self.items, []
        self.batches += 1
        return self.batches, items

    def _queue(self, token: int, life: str) -> asyncio.Queue[Any]:
        return self.answers.setdefault((token, life), asyncio.Queue())

    async def answer(self, token: int, life: str, answer: Any) -> None:
        self._queue(token, life).put_nowait(answer)

    async def ask(self, token: int, life: str, seq: int, payload: Any, timeout: float) -> Any:
        """Post a question and wait for its answer in one call (one round trip fewer)."""
        await self.post(token, life, seq, "ask", payload)
        return await self.wait_answer(token, life, timeout)

    async def wait_answer(self, token: int, life: str, timeout: float) -> Any:
        try:
            return await asyncio.wait_for(self._queue(token, life).get(), timeout)
        except TimeoutError:
            return None


class Endpoint:
    """Where workers reach the coordinator directly: a listener on this node's Ray address (Ray
    already needs workers to reach the driver there), authenticated by a key made for the run.
    Each worker's connection has a reader thread handing its messages, in order, to `deliver`;
    `answer` sends back on the connection the message came from."""

    def __init__(self, host: str, deliver: Any) -> None:
        import secrets
        from multiprocessing.connection import Listener

        self.key = secrets.token_bytes(32)
        self.listener = Listener((host, 0), authkey=self.key)
        self.address: tuple[str, int] = self.listener.address
        self.deliver = deliver
        self._conns: dict[tuple[int, str], Any] = {}
        self._send_lock = threading.Lock()
        #: Messages delivered per (task, incarnation); a finished task says how many it sent.
        self._delivered: dict[tuple[int, str], int] = {}
        self._progress = threading.Condition()
        self._closed = False
        threading.Thread(target=self._accept, name="ai-sdlc-ray-accept", daemon=True).start()

    @property
    def spec(self) -> tuple[str, int, bytes]:
        return self.address[0], self.address[1], self.key

    def _accept(self) -> None:
        from multiprocessing import AuthenticationError

        while not self._closed:
            try:
                conn = self.listener.accept()
            except (AuthenticationError, EOFError, ConnectionError):
                continue  # a stranger, or a worker that went away while connecting
            except OSError:
                return  # closed
            no_delay(conn)
            threading.Thread(
                target=self._read, args=(conn,), name="ai-sdlc-ray-link", daemon=True
            ).start()

    def _read(self, conn: Any) -> None:
        key: tuple[int, str] | None = None
        try:
            while True:
                token, life, kind, payload = pickle.loads(conn.recv_bytes())
                if key is None:
                    key = (int(token), str(life))
                    self._conns[key] = conn
                self.deliver(token, life, kind, payload)
                with self._progress:
                    self._delivered[key] = self._delivered.get(key, 0) + 1
                    self._progress.notify_all()
        except (EOFError, OSError):
            pass  # the worker finished (or died): what it sent has all been delivered
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def answer(self, token: int, life: str, answer: Any) -> bool:
        """False when the worker is not on a connection of its own (it uses the mailbox)."""
        conn = self._conns.get((token, life))
        if conn is None:
            return False
        from ray import cloudpickle

        data = cloudpickle.dumps(answer)  # type: ignore[no-untyped-call]
        with self._send_lock, contextlib.suppress(OSError):
            conn.send_bytes(data)
        return True

    def settle(self, token: int, life: str, sent: int, timeout: float) -> None:
        """Wait until the `sent` messages of a finished task have all been delivered."""
        key = (token, life)
        with self._progress:
            self._progress.wait_for(lambda: self._delivered.get(key, 0) >= sent, timeout)
        self._conns.pop(key, None)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.close()


__all__ = ["TAKES_IN_FLIGHT", "Endpoint", "Mailbox"]
