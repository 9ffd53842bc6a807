"""The append half every engine's writer shares: events queued in seq order until the next
flush, and refused once the writer has failed.

A writer (`LogWriter`, `SqliteWriter`, `PostgresWriter`) keeps `next_seq`, `failure` and
`_pending` itself and says where it writes (`_location`); how a batch reaches the engine is its
own business. `batch_rows` is what a batch adds to a database engine's tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from ..core.chunk_rows import StorageRecord, decode_storage_record
from ..core.events import SessionArchived, SessionEvent, SessionTitle, SubagentStart
from ..core.paging import message_cut, record_count, record_start
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


_encoder: Final = msgspec.json.Encoder()


class BatchRows(msgspec.Struct, frozen=True):
    """What a batch of records adds to a database store's tables, the same for every engine."""

    records: list[tuple[str, int, int, str]]
    """(session, first seq, event count, the record's JSON text as written)."""
    lines: list[bytes]
    """Each record's JSON text as bytes: the lines its chunk checks are made of."""
    messages: list[tuple[str, int, int]]
    """(session, the record's first seq, the message cut it holds): the message index."""
    children: list[tuple[str, str]]
    """(session, child session) for each subagent started."""
    title: str | None
    """The batch's last title, if it set one."""
    archived: bool | None
    """Whether the session is archived after the batch, if the batch says (None: unchanged)."""
    last_time: int | None
    """The time of its last event (None for an empty batch)."""
    end: int
    """The session's next seq once the batch is stored."""


def batch_rows(session_id: str, first: int, records: Sequence[StorageRecord]) -> BatchRows:
    """The rows of `records`, whose seqs run from `first` on."""
    rows: list[tuple[str, int, int, str]] = []
    lines: list[bytes] = []
    messages: list[tuple[str, int, int]] = []
    children: list[tuple[str, str]] = []
    title: str | None = None
    archived: bool | None = None
    end = first
    for record in records:
        start = record_start(record)
        count = record_count(record)
        line = _encoder.encode(record)
        lines.append(line)
        rows.append((session_id, start, count, line.decode()))
        cut = message_cut(record, start)
        if cut is not None:
            messages.append((session_id, start, cut))
        elif type(record) is SubagentStart:
            children.append((session_id, record.data.child_session_id))
        elif type(record) is SessionTitle:
            title = record.data.title
        elif type(record) is SessionArchived:
            archived = record.data.archived
        end = start + count
    last_time = decode_storage_record(records[-1])[-1].time if records else None
    return BatchRows(rows, lines, messages, children, title, archived, last_time, end)
