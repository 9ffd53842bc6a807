"""A tail open (SPEC 4.2's `replay.maxMessages`) without I/O: how far back a session must be
read for a load to replay its newest messages and continue, and what it keeps of the rest.

A session loaded for a tail holds its records from a `base` seq on, and of everything before
it only its prefix (`TailPrefix`): the latest event of each setting the session's folds read
(mode, each config option, title, context, archived) and how many model calls were made. The
base is a turn start at or before both the replay's first turn (`projection.tail_start`) and
the turn holding the first event the provider history needs after the latest compaction (SPEC
4.6); recovery's last turn is always held, being after both.

`tail_base` decides from records read backward whether they reach far enough; a store reads
more until they do. The stores keep a prefix the same way: `fold_prefix` over the events
appended, keyed so that it stays a handful of events however long the session grows.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import Final, cast

import msgspec

from .chunk_rows import ROW_CLASSES, StorageRecord
from .events import (
    AssistantChunk,
    AssistantMessageEvent,
    ContextCompaction,
    SessionArchived,
    SessionConfig,
    SessionContext,
    SessionEvent,
    SessionMode,
    SessionRewind,
    SessionTitle,
    StepStart,
    TurnStart,
    UserMessageEvent,
)
from .paging import clip_records, record_start

PREFIX_TYPES: Final = (SessionMode, SessionConfig, SessionTitle, SessionContext, SessionArchived)
"""The events whose latest (per setting) a session keeps from before its base."""

NOT_PLAIN: Final = frozenset((*ROW_CLASSES, AssistantChunk))
"""The records that are chunks: no fold of `tail_base` reads them."""

PREFIX_KINDS: Final = frozenset((*PREFIX_TYPES, StepStart, ContextCompaction, SessionRewind))
"""What `fold_prefix` reads: a batch holding none of these leaves a prefix as it was."""

PREFIX_TAGS: Final = tuple(
    kind.__struct_config__.tag
    for kind in (*PREFIX_TYPES, StepStart, ContextCompaction, SessionRewind)
)
"""The `type` of every event a store's prefix read returns: the settings, and `step/start`,
`context/compaction` and `session/rewind` (counted, or their seq kept)."""


class TailPrefix(msgspec.Struct):
    """What a session keeps of the events before its base."""

    events: list[SessionEvent] = msgspec.field(default_factory=list)
    """The latest event of each setting, in seq order."""
    steps: int = 0
    """The `step/start`s before the base: the model calls made (llm-replay counts them)."""
    compaction: int = -1
    """The seq of the latest `context/compaction` before the base (-1: none)."""
    rewind: int = -1
    """The seq of the latest `session/rewind` before the base (-1: none)."""

    @property
    def compacted(self) -> bool:
        """Whether a compaction is the latest of the two: without one, or with a rewind after
        it, a session's provider history may need any of its events (`tail_base` is 0)."""
        return self.compaction > self.rewind


def _key(event: SessionEvent) -> object:
    if type(event) is SessionConfig:
        return (SessionConfig, event.data.config_id)
    return type(event)


def fold_prefix(prefix: TailPrefix, events: Iterable[object]) -> TailPrefix:
    """`prefix` followed by `events` (in seq order; any event or storage record, only the
    settings kept)."""
    latest = {_key(e): e for e in prefix.events}
    steps, compaction, rewind = prefix.steps, prefix.compaction, prefix.rewind
    for event in events:
        kind = type(event)
        if kind is StepStart:
            steps += 1
        elif kind is ContextCompaction:
            compaction = cast(ContextCompaction, event).seq
        elif kind is SessionRewind:
            rewind = cast(SessionRewind, event).seq
        elif kind in PREFIX_TYPES:
            setting = cast(SessionEvent, event)
            latest.pop(_key(setting), None)  # re-inserted last: the dict stays in seq order
            latest[_key(setting)] = setting
    return TailPrefix(list(latest.values()), steps, compaction, rewind)


def prefix_before(
    known: TailPrefix, through: int, base: int, between: Sequence[SessionEvent]
) -> TailPrefix:
    """The prefix of `base` from `known`, the prefix of `through`, and `between`: the plain
    events from `min(through, base)` to `max(through, base)`."""
    if through <= base:
        return fold_prefix(known, between)
    # Past the base: a setting `known` holds from there was overridden by none before it, so
    # the older value is lost, but the held events carry the newer one, which every fold
    # reads last. Only the count must be exact.
    later_steps = sum(1 for e in between if type(e) is StepStart and e.seq >= base)
    return TailPrefix(
        [e for e in known.events if e.seq < base],
        known.steps - later_steps,
        # One from the base on is among the held events, which come later: only the latest
        # of each is ever asked for.
        known.compaction if known.compaction < base else -1,
        known.rewind if known.rewind < base else -1,
    )


def tail_base(events: Sequence[SessionEvent], lo: int, max_messages: int) -> int | None:
    """Where a session loaded for its newest `max_messages` messages may start, given its plain
    events (no chunks) from seq `lo` to its end: None when they do not reach far enough back
    (read more before `lo`). A base of 0 is the whole session."""
    if max_messages < 1:
        raise ValueError("max_messages must be positive")
    turns = [e.seq for e in events if type(e) is TurnStart]
    messages = [e.seq for e in events if _is_message(e)]
    if len(messages) < max_messages:
        return None if lo > 0 else 0  # the replay is the whole session
    replay = _turn_at(turns, messages[-max_messages])
    history = _history_start(events, turns)
    if replay is None or history is None:
        return None if lo > 0 else 0
    return min(replay, history)


def _is_message(event: SessionEvent) -> bool:
    return type(event) is UserMessageEvent or type(event) is AssistantMessageEvent


def _turn_at(turns: list[int], seq: int) -> int | None:
    """The last turn start at or before `seq` among `turns` (None: not among them)."""
    i = bisect_right(turns, seq)
    return turns[i - 1] if i else None


def _history_start(events: Sequence[SessionEvent], turns: list[int]) -> int | None:
    """The turn start from which the provider history is whole: that holding the first event
    after the latest compaction's `throughSeq`. None when the events cannot tell: no
    compaction, or a rewind after the latest (it may have rewound it, and the one that then
    counts may be older)."""
    for event in reversed(events):
        if type(event) is SessionRewind:
            return None
        if type(event) is ContextCompaction:
            return _turn_at(turns, event.data.through_seq + 1)
    return None


def held_turns(events: Iterable[SessionEvent]) -> int:
    """The number of the first turn `events` (from a base, which is a turn start) hold."""
    for event in events:
        if type(event) is TurnStart:
            return event.data.turn
    return 0


FIRST_STEP: Final = 64
"""How many seqs before what is read a tail read first reaches back: a turn start, or a
compaction turn, is usually that close."""


def next_reach(lo: int, events: Sequence[SessionEvent], step: int) -> int:
    """Where to read back to next, from `lo`, when the plain `events` read from it do not
    reach far enough: `step` seqs before the first event the provider history needs (the
    latest compaction's `throughSeq` + 1) when they hold that compaction, else before `lo`."""
    target = lo
    for event in reversed(events):
        if type(event) is SessionRewind:
            break
        if type(event) is ContextCompaction:
            target = min(lo, event.data.through_seq + 1)
            break
    return max(0, target - step)


class TailRead:
    """Reading a session back from its end until its base is found, without I/O: the reader
    reads what `wanted` says (the records of seqs `[lo, hi)`) and hands them to `took`, until
    `wanted` is None; `held` is then what the session holds from its `base`. The first read
    may be anything ending at the end (the page of the newest messages, say)."""

    def __init__(self, end: int, max_messages: int) -> None:
        self.end = end
        self.max_messages = max_messages
        self.lo = end
        """The first seq read so far."""
        self.base: int | None = 0 if end == 0 else None
        self._records: list[StorageRecord] = []
        self._plain: list[SessionEvent] = []
        self._step = FIRST_STEP
        """How far before what it needs the next read reaches: doubled after each read."""

    def wanted(self) -> tuple[int, int] | None:
        """The seqs to read next (None: the base is found)."""
        if self.base is not None:
            return None
        return next_reach(self.lo, self._plain, self._step), self.lo

    def took(self, records: Sequence[StorageRecord], lo: int) -> None:
        """The records of seqs `[lo, self.lo)`, just read."""
        self._records[:0] = records
        self._plain[:0] = [cast(SessionEvent, r) for r in records if type(r) not in NOT_PLAIN]
        self.lo = lo
        self.base = tail_base(self._plain, lo, self.max_messages)
        self._step *= 2

    def held(self) -> list[StorageRecord]:
        """The records from the base on (once it is found)."""
        if self.base is None:
            raise ValueError("the base is not found yet")
        starts = [record_start(r) for r in self._records]
        return clip_records(self._records, starts, self.base, self.end)

    def between(self, lo: int, hi: int) -> list[SessionEvent]:
        """The plain events read of seqs `[lo, hi)`."""
        return [e for e in self._plain if lo <= e.seq < hi]
