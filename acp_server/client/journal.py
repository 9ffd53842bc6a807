"""One session's history stitched into one gapless event list (SPEC 3.3), without I/O.

A `Journal` holds the events of one session from `first_seq` to `last_seq`, every seq in
between, each exactly once. It starts from a `session.follow` snapshot or a `session.page`
result, and grows at both ends:

- at the tail, from live `session.event` frames (`apply_live`), from any records
  (`apply_records`) and from pages that repair a gap (`fill_gap`);
- at the head, from older pages (`prepend`), until `has_older` is false.

Nothing here reads a pipe or waits: each method checks what the server sent against what the
journal holds, applies it or refuses it, and returns what the caller must do next as a value. A
missing stretch is reported as a `Gap` (the caller pages it and passes the page to `fill_gap`);
history that breaks SPEC 3 (a malformed row, records out of order, a partial overlap, an event
that differs from the one already held under its seq) is a `HistoryProtocolError`, and the journal
is left as it was.

Records are expanded to exact events by the strict decoder `expand_history_record`, so a packed
row never makes a false gap: continuity is checked on the events' own seqs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, cast

import msgspec

from ..core.events import EventError, SessionEvent, convert_event
from ..core.history import HistoryProtocolError, expand_history_record


@dataclass(frozen=True)
class Gap:
    """The events after `after_seq` and before `before_seq` are missing.

    Page them (`session.page` with `throughSeq = before_seq - 1`) and pass the records to
    `Journal.fill_gap`.
    """

    after_seq: int
    before_seq: int

    @property
    def through_seq(self) -> int:
        """The last missing seq: the `throughSeq` of the page that repairs the gap."""
        return self.before_seq - 1


class Journal:
    """The events of one session from `first_seq` through `last_seq`, with no holes."""

    def __init__(self, events: Sequence[SessionEvent] = (), *, has_older: bool = False) -> None:
        """A journal holding `events` (contiguous seqs); `has_older` says whether the
        session holds events before the first of them. With no events, it starts at seq 0."""
        _check_contiguous(events)
        self._events: list[SessionEvent] = list(events)
        self._first_seq = events[0].seq if events else 0
        self._has_older = has_older
        _check_has_older(self._first_seq, has_older)

    @classmethod
    def from_page(cls, records: list[Any], has_more: bool) -> Journal:
        """A journal holding one `session.page` result: its `records` and `hasMore`."""
        events = _expand(records)
        if not events and has_more:
            raise HistoryProtocolError("an empty page cannot have more before it")
        return cls(events, has_older=has_more)

    @classmethod
    def from_snapshot(cls, records: list[Any], cursor: int, has_more: bool) -> Journal:
        """A journal holding a `session.follow` result: its page must end at its `cursor`,
        so that the first live event, `cursor + 1`, continues it."""
        journal = cls.from_page(records, has_more)
        if journal.last_seq != cursor:
            raise HistoryProtocolError(
                f"the snapshot ends at seq {journal.last_seq}, not at its cursor {cursor}"
            )
        return journal

    # -- what it holds -------------------------------------------------------------------------

    @property
    def events(self) -> Sequence[SessionEvent]:
        """Every event held, in seq order (a view: do not modify it)."""
        return self._events

    @property
    def first_seq(self) -> int:
        """The seq of the first event held (0 when the journal is empty)."""
        return self._first_seq

    @property
    def last_seq(self) -> int:
        """The seq of the last event held (`first_seq - 1` when the journal is empty)."""
        return self._first_seq + len(self._events) - 1

    @property
    def has_older(self) -> bool:
        """The session holds events before `first_seq`: page them with `beforeSeq = first_seq`."""
        return self._has_older

    def __len__(self) -> int:
        return len(self._events)

    def event_at(self, seq: int) -> SessionEvent:
        """The held event with this seq."""
        if not self._holds(seq):
            raise IndexError(
                f"seq {seq} is not held (the journal holds {self.first_seq}..{self.last_seq})"
            )
        return self._events[seq - self._first_seq]

    # -- growing at the tail -------------------------------------------------------------------

    def apply_live(self, event: SessionEvent | Any) -> Gap | None:
        """Add one live event (a `session.event` frame's `event`, decoded or as parsed JSON).

        An event already held is dropped; the next one is appended; one after a gap is not
        appended: the gap is returned, and the event can be applied again once it is filled.
        """
        event = _decode_live(event)
        if event.seq < self._first_seq:
            raise HistoryProtocolError(
                f"live event seq {event.seq} is older than the journal's first seq {self._first_seq}"
            )
        if self._holds(event.seq):
            self._check_same([event])
            return None
        if event.seq > self.last_seq + 1:
            return Gap(self.last_seq, event.seq)
        self._events.append(event)
        return None

    def apply_records(self, records: list[Any]) -> Gap | None:
        """Add records (contiguous, in order) at the tail, record by record.

        A record wholly covered by what the journal holds is dropped; a record that overlaps
        the held events only in part is a protocol error; the first record not held must start
        right after `last_seq`, else nothing is added and the gap is returned.
        """
        spans = [expand_history_record(record, index) for index, record in enumerate(records)]
        _check_contiguous([event for span in spans for event in span])
        fresh: list[SessionEvent] = []
        for index, span in enumerate(spans):
            if fresh:
                fresh.extend(span)  # contiguous: the rest follows what is added
            elif all(self._holds(event.seq) for event in span):
                self._check_same(span)
            elif span[-1].seq < self._first_seq:
                raise HistoryProtocolError(
                    f"records[{index}] (seqs {span[0].seq}..{span[-1].seq}) is older than the journal's "
                    f"first seq {self.first_seq}: older pages are prepended"
                )
            elif span[0].seq <= self.last_seq:
                raise HistoryProtocolError(
                    f"records[{index}] (seqs {span[0].seq}..{span[-1].seq}) overlaps the journal "
                    f"({self.first_seq}..{self.last_seq}) in part"
                )
            elif span[0].seq > self.last_seq + 1:
                return Gap(self.last_seq, span[0].seq)
            else:
                fresh.extend(span)
        self._events.extend(fresh)
        return None

    def fill_gap(self, page_records: list[Any]) -> Gap | None:
        """Add what a page (or several, oldest first) holds after `last_seq`.

        Pages are message-aligned, not aligned with what the journal holds, so the page is
        taken event by event: events already held are dropped, events before `first_seq` are
        left to `prepend`. The page must reach back to the held tail (start at or before
        `last_seq + 1`); if it does not, nothing is added and the remaining gap is returned:
        page further back and pass the older records first.
        """
        events = _expand(page_records)
        if not events:
            return None
        if events[0].seq > self.last_seq + 1:
            return Gap(self.last_seq, events[0].seq)
        self._check_same([event for event in events if self._holds(event.seq)])
        self._events.extend(event for event in events if event.seq > self.last_seq)
        return None

    def drop_after(self, seq: int) -> None:
        """Forget the events after `seq`: the server said they were never stored (a follow
        ended "rewound"). Events at or before `seq` stay; the journal's head is untouched."""
        if type(seq) is not int or seq < self._first_seq - 1:
            raise HistoryProtocolError(
                f"cannot drop the events after seq {seq!r}: the journal starts at {self._first_seq}"
            )
        del self._events[seq + 1 - self._first_seq :]

    # -- growing at the head -------------------------------------------------------------------

    def prepend(self, page_records: list[Any], has_more: bool) -> None:
        """Add the next older page (asked for with `beforeSeq = first_seq`) before the head.

        It must join the head exactly: end at `first_seq - 1`, no overlap and no gap. Its
        `hasMore` becomes `has_older`; without more, the page must start at seq 0.
        """
        events = _expand(page_records)
        if not self._has_older:
            raise HistoryProtocolError(
                f"an older page, but nothing is older than seq {self._first_seq}"
            )
        if not events:
            raise HistoryProtocolError(
                f"an empty older page, but events before seq {self._first_seq} exist"
            )
        if events[-1].seq != self._first_seq - 1:
            problem = "overlaps" if events[-1].seq >= self._first_seq else "leaves a gap before"
            raise HistoryProtocolError(
                f"the older page ends at seq {events[-1].seq}: it {problem} the journal's first seq {self._first_seq}"
            )
        _check_has_older(events[0].seq, has_more)
        self._events[:0] = events
        self._first_seq = events[0].seq
        self._has_older = has_more

    # -- rules ---------------------------------------------------------------------------------

    def _holds(self, seq: int) -> bool:
        return self._first_seq <= seq <= self.last_seq

    def _check_same(self, events: Sequence[SessionEvent]) -> None:
        """A log is append-only: an event sent again under a held seq must be the one held."""
        for event in events:
            if self._events[event.seq - self._first_seq] != event:
                raise HistoryProtocolError(f"seq {event.seq} was sent again as a different event")


def _expand(records: list[Any]) -> list[SessionEvent]:
    """Records to exact events, every row and event checked, seqs contiguous."""
    events = [
        event
        for index, record in enumerate(records)
        for event in expand_history_record(record, index)
    ]
    _check_contiguous(events)
    return events


def _check_contiguous(events: Sequence[SessionEvent]) -> None:
    """Records stand for consecutive events: each seq is the previous one plus 1."""
    for previous, event in pairwise(events):
        if event.seq != previous.seq + 1:
            raise HistoryProtocolError(
                f"seq {event.seq} follows seq {previous.seq}: records must be contiguous"
            )


def _check_has_older(first_seq: int, has_older: bool) -> None:
    """Seqs start at 0, so events are older than a page exactly when it starts after seq 0."""
    if has_older != (first_seq > 0):
        claim = "more before it" if has_older else "nothing before it"
        raise HistoryProtocolError(f"the page starts at seq {first_seq} but says there is {claim}")


def _decode_live(value: Any) -> SessionEvent:
    if isinstance(value, msgspec.Struct):
        return cast(SessionEvent, value)  # a struct is an already decoded event (`apply_live`)
    try:
        return convert_event(value)
    except EventError as exc:
        raise HistoryProtocolError(f"live event: {exc}") from None
