"""The append half every engine's writer shares: events queued in seq order until the next
flush, and refused once the writer has failed.

A writer (`LogWriter`, `SqliteWriter`, `PostgresWriter`) keeps `next_seq`, `failure` and
`_pending` itself and says where it writes (`_location`); how a batch reaches the engine is its
own business.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..core.events import SessionEvent
from .errors import LogWriteFailed


class QueuedAppends:
    next_seq: int
    """The seq the next appended event must have."""
    failure: OSError | None
    """Why the writer refuses every write, once a write has failed."""
    _pending: list[SessionEvent]

    def _location(self) -> Path | str:
        """Where the session is written, for errors."""
        raise NotImplementedError

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def _check(self) -> None:
        if self.failure is not None:
            raise LogWriteFailed(self._location(), self.failure)

    def append(self, events: Sequence[SessionEvent]) -> None:
        """Queue events for the next flush; their seqs must continue the log without a gap.

        An out-of-order batch is refused whole: nothing of it is queued.
        """
        self._check()
        for offset, event in enumerate(events):
            if event.seq != self.next_seq + offset:
                raise ValueError(
                    f"append out of order: expected seq {self.next_seq + offset}, got {event.seq}"
                )
        self.next_seq += len(events)
        self._pending.extend(events)

    def append_one(self, event: SessionEvent) -> None:
        """`append` for a single event: the hot path while a model streams."""
        if self.failure is not None:
            self._check()
        if event.seq != self.next_seq:
            raise ValueError(f"append out of order: expected seq {self.next_seq}, got {event.seq}")
        self.next_seq += 1
        self._pending.append(event)
