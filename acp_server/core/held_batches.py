"""What a database writer keeps until the store has it for good, and how long it waits for the
database to come back.

A batch committed asynchronously is not yet durable: the database server may die before its
WAL reaches the disk (or the standby that takes over), and the session then ends, in the store,
before that batch. So a writer holds every batch it wrote until a synchronous commit makes all
of them durable. When its connection comes back it reads the stored next seq and writes again
exactly what the store lacks: the held events from that seq on. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .events import SessionEvent

FIRST_DELAY_S: Final = 0.05
"""The wait before the first reconnect: a dropped connection to a server that is up comes back
at once."""
MAX_DELAY_S: Final = 1.0
"""The longest wait between two reconnects: a server back from a restart is found within it."""


class NotHeld(Exception):
    """The store's next seq is outside what the writer holds: it cannot be made whole again."""


class StoreAhead(NotHeld):
    """The store holds more than this writer wrote: another writer appended to the session."""


class StoreLost(NotHeld):
    """The store lost events this writer took for durable (a failover to a standby that had
    not received them): the log cannot be made gapless from memory."""


class HeldBatches:
    """The events written since the last durable commit, in seq order, from `start` to `end`."""

    def __init__(self, next_seq: int) -> None:
        self.start = next_seq
        """The first seq not known durable."""
        self.end = next_seq
        """The seq after the last event written."""
        self._events: list[SessionEvent] = []

    def __len__(self) -> int:
        return len(self._events)

    def hold(self, batch: Sequence[SessionEvent]) -> None:
        """Keep a batch about to be written; its seqs continue the held ones."""
        if batch and batch[0].seq != self.end:
            raise ValueError(f"a batch from seq {batch[0].seq} does not follow seq {self.end - 1}")
        self._events.extend(batch)
        self.end += len(batch)

    def durable(self) -> None:
        """Everything written is durable (a synchronous commit succeeded): let it go."""
        self._events = []
        self.start = self.end

    def lacking(self, stored_next_seq: int) -> list[SessionEvent]:
        """What to write again when the store's next seq is `stored_next_seq`: every held event
        from it on (none when the store has them all). `StoreAhead` or `StoreLost` when the
        store is past what was written or short of what is held."""
        if stored_next_seq > self.end:
            raise StoreAhead(
                f"the store's next seq is {stored_next_seq}, past the {self.end} written here"
            )
        if stored_next_seq < self.start:
            raise StoreLost(
                f"the store's next seq is {stored_next_seq}, short of the {self.start} "
                "committed durably"
            )
        return self._events[stored_next_seq - self.start :]


def retry_delay(attempt: int, remaining: float) -> float | None:
    """How long to wait before reconnect `attempt` (from 0), doubling from `FIRST_DELAY_S` up
    to `MAX_DELAY_S` and never past the `remaining` seconds of the retry window; None once the
    window is over."""
    if remaining <= 0:
        return None
    doubled: float = FIRST_DELAY_S * 2.0 ** min(attempt, 32)
    return min(doubled, MAX_DELAY_S, remaining)
