"""A session's events in memory, held as storage records: rows stay packed until needed.

`EventLog` is what a live session keeps. A loaded log of 400,000 chunks is a few hundred
records here, not 400,000 event objects: everything that reads history (the provider history,
the load projection, paging) works from the plain events and the message index, and expands a
row only when its members are asked for. A loaded log may also hold `PackedChunks` (runs of
chunk lines its reader trusted by their check, not yet decoded): the plain events and the load
projection never need them decoded; the first reader that needs the chunks themselves decodes
them all. Appends arrive as plain events; `seal()` packs the chunks of a finished step into
rows, so a long live session stays compact too.

A log opened for a tail (`core.tail`) holds only the records from its `base` on, and of what
comes before only its `TailPrefix`: the plain events start with the prefix's settings, so every
fold of the settings reads them as if the whole log were there; whatever needs the events before
the base reads them from the store (`hydrate` takes them in).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import cast

from .chunk_checks import KeptRecord, PackedChunks
from .chunk_rows import ROW_CLASSES, ChunkRow, StorageRecord, expand_row, pack_chunk_runs
from .events import (
    AssistantChunk,
    SessionEvent,
    StepStart,
    TurnStart,
)
from .paging import PageCut, clip_records, message_cut, page_cut, record_count, record_start
from .tail import TailPrefix, held_turns


class EventLog:
    def __init__(
        self, records: Iterable[KeptRecord] = (), *, base: int = 0, prefix: TailPrefix | None = None
    ) -> None:
        self._records: list[KeptRecord] = []
        self.starts: list[int] = []
        """`starts[i]` is the first seq of record i."""
        self.base = base
        """The first seq held: the events before it are the store's (see `hydrate`)."""
        self.prefix = prefix if prefix is not None else TailPrefix()
        """What the log keeps of the events before `base` (nothing when it is 0)."""
        self.length = base
        self._first_turn = 0
        """The number of the first turn held."""
        self.message_seqs: list[int] = []
        self.message_cuts: list[int] = []
        """For each message, the lowest of its seq and its `sourceRange` start."""
        self.turn_starts: list[int] = []
        self.step_starts = self.prefix.steps
        self._sealed = 0
        """Records before this index are packed; appends after it are plain events."""
        self._packed = 0
        """How many of the records are `PackedChunks`."""
        self._add_all(records)
        self._sealed = len(self._records)
        if base and self.starts and self.starts[0] != base:
            raise ValueError(f"records start at seq {self.starts[0]}, not at the base {base}")
        if base:
            self._first_turn = held_turns(self.plain_events(prefix=False))

    def _add_all(self, records: Iterable[KeptRecord]) -> None:
        """`_add` for each record, rows (most of a long log's records) inlined: a loaded log
        is indexed here record by record."""
        add, row_classes = self._add, ROW_CLASSES
        append_record, append_start = self._records.append, self.starts.append
        for record in records:
            kind = type(record)
            if kind in row_classes:  # a row indexes nothing but its place
                start = cast(ChunkRow, record).seq0
                append_record(record)
                append_start(start)
                self.length = start + record_count(cast(ChunkRow, record))
            elif kind is PackedChunks:  # nor do chunks
                packed = cast(PackedChunks, record)
                append_record(packed)
                append_start(packed.seq0)
                self.length = packed.seq0 + packed.count
                self._packed += 1
            else:
                add(cast(StorageRecord, record))

    @property
    def records(self) -> list[StorageRecord]:
        """Every record, in order (rows packed; any `PackedChunks` decoded first)."""
        self._unpack()
        return cast("list[StorageRecord]", self._records)

    def _unpack(self) -> None:
        """Decode every `PackedChunks` into its records, once."""
        if not self._packed:
            return
        records: list[KeptRecord] = []
        starts: list[int] = []
        for record, start in zip(self._records, self.starts, strict=True):
            if type(record) is PackedChunks:
                for decoded in record.decode():
                    records.append(decoded)
                    starts.append(record_start(decoded))
            else:
                records.append(record)
                starts.append(start)
        # Only a loaded log's records are packed chunks, and they all come before `_sealed`.
        self._sealed += len(records) - len(self._records)
        self._records, self.starts, self._packed = records, starts, 0

    def __len__(self) -> int:
        return self.length

    @property
    def last_seq(self) -> int:
        return self.length - 1

    @property
    def turns(self) -> int:
        return self._first_turn + len(self.turn_starts)

    def append(self, event: SessionEvent) -> None:
        """Add the next event (its seq must be `len(self)`)."""
        seq = event.seq
        if seq != self.length:
            raise ValueError(f"event seq {seq} does not follow {self.length - 1}")
        if type(event) is AssistantChunk:
            # The hot path while a model streams: what `_add` does for a plain event that
            # indexes nothing.
            self._records.append(event)
            self.starts.append(seq)
            self.length = seq + 1
            return
        self._add(event)

    def _add(self, record: StorageRecord) -> None:
        start = record_start(record)
        self._records.append(record)
        self.starts.append(start)
        self.length = start + record_count(record)
        cut = message_cut(record, start)
        if cut is not None:
            self.message_seqs.append(start)
            self.message_cuts.append(cut)
        elif type(record) is TurnStart:
            self.turn_starts.append(start)
        elif type(record) is StepStart:
            self.step_starts += 1

    def seal(self) -> None:
        """Pack the plain chunks appended since the last seal into rows (a step has ended)."""
        tail = cast("list[StorageRecord]", self._records[self._sealed :])  # plain events
        if any(type(r) is AssistantChunk for r in tail):
            packed = pack_chunk_runs(tail)
            del self._records[self._sealed :]
            del self.starts[self._sealed :]
            self._records.extend(packed)
            self.starts.extend(record_start(r) for r in packed)
        self._sealed = len(self._records)

    # -- reading -------------------------------------------------------------------------------

    def plain_events(self, *, prefix: bool = True) -> Iterator[SessionEvent]:
        """Every event but the chunks (rows, `PackedChunks` and plain `assistant/chunk`
        events), in order: what the readers of history other than the projection and paging
        read (the provider history, recovery, settings, usage), none of which needs a chunk.
        A log held from a base starts with its prefix's settings (unless not `prefix`)."""
        if prefix:
            yield from self.prefix.events
        for record in self._records:
            kind = type(record)
            if kind is not AssistantChunk and kind is not PackedChunks and kind not in ROW_CLASSES:
                yield cast(SessionEvent, record)

    def hydrate(self, earlier: Sequence[StorageRecord]) -> None:
        """Take in the records before the base (the store's `[0, base)`): the log is whole."""
        if not self.base:
            return
        whole = EventLog(earlier)
        if whole.length != self.base:
            raise ValueError(f"the records end at seq {whole.length}, not at the base {self.base}")
        self._unpack()
        whole._unpack()
        whole._records += self._records
        whole.starts += self.starts
        whole.message_seqs += self.message_seqs
        whole.message_cuts += self.message_cuts
        whole.turn_starts += self.turn_starts
        sealed = len(whole._records) - len(self._records) + self._sealed
        self._records, self.starts = whole._records, whole.starts
        self.message_seqs, self.message_cuts = whole.message_seqs, whole.message_cuts
        self.turn_starts = whole.turn_starts
        self._sealed = sealed
        self.base, self.prefix, self._first_turn = 0, TailPrefix(), 0

    def events(self, lo: int = 0, hi: int | None = None) -> list[SessionEvent]:
        """The events with seqs in `[lo, hi)` (held: from the base on), rows expanded."""
        hi = self.length if hi is None else hi
        expanded: list[SessionEvent] = []
        for record in clip_records(self.records, self.starts, lo, hi):
            if type(record) in ROW_CLASSES:
                expanded.extend(expand_row(cast(ChunkRow, record)))
            else:
                expanded.append(cast(SessionEvent, record))
        return expanded

    def event_at(self, seq: int) -> SessionEvent:
        return self.events(seq, seq + 1)[0]

    def records_between(self, lo: int, hi: int) -> list[StorageRecord]:
        """The canonical packing of the events in `[lo, hi)`."""
        return pack_chunk_runs(clip_records(self.records, self.starts, lo, hi))

    def page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        """SPEC 3.1's page ending before `end`, with its canonical records."""
        cut = page_cut(self.message_seqs, self.message_cuts, end, max_messages)
        return cut, self.records_between(cut.start, cut.end)

    def turn_start_before(self, seq: int) -> int:
        """The seq of the last `turn/start` at or before `seq` (0 if there is none)."""
        i = bisect_right(self.turn_starts, seq)
        return self.turn_starts[i - 1] if i else 0

    def records_from(self, seq: int) -> Sequence[KeptRecord]:
        """The records from `seq` on, as held: `PackedChunks` stay packed (the load projection
        decodes only those it shows). `seq` must be a record boundary, e.g. a turn start."""
        index = bisect_left(self.starts, seq)
        if index < len(self.starts) and self.starts[index] != seq:
            raise ValueError(f"seq {seq} is not the start of a record")
        return self._records[index:]
