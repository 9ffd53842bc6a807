"""The live state of one open session log: its events in memory, its writer, its listeners.

Every event the agent produces goes through `SessionRecorder.append`, which gives it the next
seq and the current time, adds it to the in-memory `EventLog`, queues it for the log file, and
hands it to listeners (the followers of `session.follow`) in seq order. Durability is the
caller's policy (SPEC 2.4): `flush()` when chunks have waited long enough (`run_flusher` does it
every 100 ms), `sync()` at the points where a crash must lose nothing. Both are awaited: the
store's writer does its blocking work in its own worker thread, never on the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

import anyio

from ..core.event_log import EventLog
from ..core.events import SessionEvent
from ..core.header import SessionHeader
from ..storage.api import Writer
from ..storage.errors import LogWriteFailed

FLUSH_INTERVAL_S: Final = 0.1
"""SPEC 2.4: a crash loses at most this much streamed output."""

Listener = Callable[[SessionEvent], None]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class SessionRecorder:
    def __init__(
        self,
        writer: Writer,
        log: EventLog,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.writer = writer
        self.log = log
        self.clock = clock
        self.listeners: list[Listener] = []

    @property
    def header(self) -> SessionHeader:
        return self.writer.header

    @property
    def session_id(self) -> str:
        return self.writer.header.id

    @property
    def last_seq(self) -> int:
        return self.log.last_seq

    def append(self, make: Any, data: Any, **envelope: Any) -> Any:
        """Create an event of type `make` with the next seq, log it and announce it."""
        event = make(self.log.length, self.clock(), data, **envelope)
        # The writer first: one that can no longer write refuses the event before anything
        # (memory, listeners) holds an event the log will never have.
        self.writer.append_one(event)
        self.log.append(event)
        for listener in self.listeners:
            listener(event)
        return event

    async def flush(self) -> None:
        await self.writer.flush()

    async def sync(self) -> None:
        await self.writer.sync()

    def seal(self) -> None:
        """A step has ended: keep its chunks packed in memory from now on."""
        self.log.seal()

    async def close(self) -> None:
        await self.writer.close()

    async def run_flusher(self, interval: float = FLUSH_INTERVAL_S) -> None:
        """Flush queued events every `interval` seconds until cancelled, or until a write
        fails (the turn then meets `LogWriteFailed` at its next append or sync)."""
        while True:
            await anyio.sleep(interval)
            writer = self.writer
            if writer.closed or writer.failure is not None:
                return
            if writer.has_pending:
                try:
                    await writer.flush()
                except LogWriteFailed:
                    return
