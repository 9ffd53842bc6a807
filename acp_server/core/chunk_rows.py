"""The packed chunk-row codec (SPEC 2.1): runs of delta chunks stored as one row, losslessly.

A run of at least `MIN_RUN` consecutive delta chunks of one block becomes a `ChunkRow`; member k
is the event with seq `seq0 + k` and time `time0 + dt[0] + ... + dt[k-1]`. Each member keeps its
own fragment, so token boundaries survive. Both directions are pure functions:

- `pack_chunk_runs(events)` turns logical events into storage records (events and rows);
- `decode_storage_record(record)` turns one storage record back into its exact events.

The same rows travel on the wire in `session.page` and `session.follow` results.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import accumulate, repeat
from typing import Annotated, Any, Final, cast

import msgspec
from msgspec import UNSET, Meta, UnsetType

from .events import (
    AssistantChunk,
    AssistantChunkData,
    EventError,
    KnownEvent,
    SessionEvent,
    UnknownEvent,
    convert_event,
)
from .stream import ReasoningDelta, StreamChunk, TextDelta, ToolCallDelta
from .structs import MAX_SAFE_INTEGER, Model, SafeInt, Seq, Tagged

MIN_RUN: Final = 3
"""Shorter runs stay plain events: a row's envelope would cost more than it saves."""

Fragments = Annotated[list[str], Meta(min_length=1)]


class TextChunksData(Model):
    turn: int
    step: int
    index: int
    dt: list[int]
    texts: Fragments


class ToolCallChunksData(Model, kw_only=True):
    turn: int
    step: int
    index: int
    dt: list[int]
    id: str
    name: str | UnsetType = UNSET
    args: Fragments


class TextChunks(Tagged, tag="text-chunks"):
    seq0: Seq
    time0: SafeInt
    data: TextChunksData


class ReasoningChunks(Tagged, tag="reasoning-chunks"):
    seq0: Seq
    time0: SafeInt
    data: TextChunksData


class ToolCallChunks(Tagged, tag="tool-call-chunks"):
    seq0: Seq
    time0: SafeInt
    data: ToolCallChunksData


ChunkRow = TextChunks | ReasoningChunks | ToolCallChunks
StorageRecord = KnownEvent | ChunkRow | UnknownEvent
"""One body line of a session log: a plain event or a chunk row."""

_TypedRecord = KnownEvent | ChunkRow

ROW_TYPES: Final[frozenset[str]] = frozenset(
    {"text-chunks", "reasoning-chunks", "tool-call-chunks"}
)


class ChunkRowError(ValueError):
    """A chunk row breaks a rule of SPEC 2.1; the message names the row and the rule."""


# ---------------------------------------------------------------------------------------------
# Packing.

ROW_CLASSES: Final = (TextChunks, ReasoningChunks, ToolCallChunks)

RowKind = type[TextChunks] | type[ReasoningChunks] | type[ToolCallChunks]
_ROW_OF_DELTA: Final[dict[type, RowKind]] = {
    TextDelta: TextChunks,
    ReasoningDelta: ReasoningChunks,
    ToolCallDelta: ToolCallChunks,
}

_DeltaChunk = TextDelta | ReasoningDelta | ToolCallDelta
_Name = str | UnsetType | None
"""A run's tool-call name: `None` for a text or reasoning run."""


class _Run:
    """Consecutive members of one block gathered for a row: plain delta events and rows."""

    __slots__ = (
        "count",
        "id",
        "index",
        "kind",
        "last_seq",
        "last_time",
        "name",
        "parts",
        "step",
        "turn",
    )

    def __init__(
        self, kind: RowKind, turn: int, step: int, index: int, id: str | None, name: _Name
    ) -> None:
        self.kind, self.turn, self.step, self.index, self.id, self.name = (
            kind,
            turn,
            step,
            index,
            id,
            name,
        )
        self.last_seq = self.last_time = 0
        self.parts: list[AssistantChunk | ChunkRow] = []
        """The members: delta events (whose chunk is a `_DeltaChunk`) and rows of `kind`."""
        self.count = 0

    def accepts(
        self,
        kind: RowKind,
        turn: int,
        step: int,
        index: int,
        id: str | None,
        name: _Name,
        seq: int,
        time: int,
    ) -> bool:
        """SPEC 2.1's continuity rule, between this run's last member and a next one."""
        return (
            kind is self.kind
            and seq == self.last_seq + 1
            and abs(time - self.last_time) <= MAX_SAFE_INTEGER
            and turn == self.turn
            and step == self.step
            and index == self.index
            and id == self.id
            and name == self.name
        )

    def close(self, out: list[StorageRecord]) -> None:
        parts = self.parts
        if self.count < MIN_RUN:
            for part in parts:
                if isinstance(part, AssistantChunk):
                    out.append(part)
                else:
                    out.extend(expand_row(part))
            return
        if len(parts) == 1:  # a stored row that nothing joined: keep it as it is
            out.append(parts[0])
            return
        dt: list[int] = []
        fragments: list[str] = []
        previous_time: int | None = None
        is_tool = self.kind is ToolCallChunks
        for part in parts:
            if isinstance(part, AssistantChunk):
                time = part.time
                # A run's chunk events hold deltas of its kind (see `pack_chunk_runs`).
                chunk = part.data.chunk
                fragments.append(
                    cast(ToolCallDelta, chunk).arguments_delta
                    if is_tool
                    else cast("TextDelta | ReasoningDelta", chunk).text
                )
                if previous_time is not None:
                    dt.append(time - previous_time)
                previous_time = time
            else:
                if previous_time is not None:
                    dt.append(part.time0 - previous_time)
                dt.extend(part.data.dt)
                if isinstance(part, ToolCallChunks):
                    fragments.extend(part.data.args)
                else:
                    fragments.extend(part.data.texts)
                previous_time = part.time0 + sum(part.data.dt)
        first = parts[0]
        seq0, time0 = (
            (first.seq, first.time)
            if isinstance(first, AssistantChunk)
            else (first.seq0, first.time0)
        )
        if self.kind is ToolCallChunks:
            # A tool-call run always has an id (see `pack_chunk_runs`).
            out.append(
                ToolCallChunks(
                    seq0,
                    time0,
                    ToolCallChunksData(
                        turn=self.turn,
                        step=self.step,
                        index=self.index,
                        dt=dt,
                        id=cast(str, self.id),
                        name=cast("str | UnsetType", self.name),
                        args=fragments,
                    ),
                )
            )
        else:
            text_kind = cast("type[TextChunks] | type[ReasoningChunks]", self.kind)
            out.append(
                text_kind(
                    seq0, time0, TextChunksData(self.turn, self.step, self.index, dt, fragments)
                )
            )


def _has_unsafe_gap(dt: list[int]) -> bool:
    return bool(dt) and (max(dt) > MAX_SAFE_INTEGER or min(dt) < -MAX_SAFE_INTEGER)


def _split_unsafe_rows(records: Iterable[StorageRecord]) -> Iterable[StorageRecord]:
    """The records, with any row whose inner time gaps break the continuity rule expanded.

    Only a hand-made row can hold such a gap; its members are then packed one by one.
    """
    for record in records:
        # `type() in` rather than isinstance: far cheaper for msgspec structs, on every record.
        if type(record) in ROW_CLASSES and _has_unsafe_gap(cast(ChunkRow, record).data.dt):
            yield from expand_row(cast(ChunkRow, record))
        else:
            yield record


def pack_chunk_runs(records: Iterable[StorageRecord]) -> list[StorageRecord]:
    """Pack every run of at least `MIN_RUN` eligible delta chunks into a row.

    Every other event passes through unchanged and in place. `records` may hold rows as well
    as events: adjacent rows and deltas that continue one run are merged, so the result depends
    only on the logical events, never on how they were stored before (it is canonical).
    """
    out: list[StorageRecord] = []
    run: _Run | None = None
    id_: str | None
    name: _Name
    for record in _split_unsafe_rows(records):
        if type(record) is AssistantChunk:
            chunk = record.data.chunk
            row_kind = _ROW_OF_DELTA.get(type(chunk))
            if row_kind is not None and record.ignorable is UNSET and record.source_range is UNSET:
                chunk = cast(_DeltaChunk, chunk)  # the chunk types with a row kind
                d = record.data
                if type(chunk) is ToolCallDelta:
                    id_, name = chunk.id, chunk.name
                else:
                    id_, name = None, None
                seq, time = record.seq, record.time
                if run is None or not run.accepts(
                    row_kind, d.turn, d.step, chunk.index, id_, name, seq, time
                ):
                    if run is not None:
                        run.close(out)
                    run = _Run(row_kind, d.turn, d.step, chunk.index, id_, name)
                run.parts.append(record)
                run.count += 1
                run.last_seq, run.last_time = seq, time
                continue
        elif type(record) in ROW_CLASSES:
            record = cast(ChunkRow, record)
            if isinstance(record, ToolCallChunks):
                calls = record.data
                id_, name = calls.id, calls.name
                count = len(calls.args)
            else:
                id_, name = None, None
                count = len(record.data.texts)
            rd = record.data
            seq0, time0 = record.seq0, record.time0
            kind = type(record)
            if run is None or not run.accepts(
                kind, rd.turn, rd.step, rd.index, id_, name, seq0, time0
            ):
                if run is not None:
                    run.close(out)
                run = _Run(kind, rd.turn, rd.step, rd.index, id_, name)
            run.parts.append(record)
            run.count += count
            run.last_seq, run.last_time = seq0 + count - 1, time0 + sum(rd.dt)
            continue
        if run is not None:
            run.close(out)
            run = None
        out.append(record)
    if run is not None:
        run.close(out)
    return out


# ---------------------------------------------------------------------------------------------
# Decoding.


def _row_name(value: Any) -> str:
    """How an error names a row: its type and first seq, as far as they can be read."""
    if isinstance(value, (TextChunks, ReasoningChunks, ToolCallChunks)):
        return f"{value.__struct_config__.tag} row (seq0={value.seq0})"
    if isinstance(value, dict):
        return f"{value.get('type', 'chunk')} row (seq0={value.get('seq0', '?')!r})"
    return "chunk row"


def _check_members(row: ChunkRow, count: int) -> None:
    """SPEC 2.1's rules on a row's shape: `dt` length and safe seqs and times."""
    dt = row.data.dt
    if len(dt) != count - 1:
        raise ChunkRowError(f"{_row_name(row)}: dt has {len(dt)} entries, expected {count - 1}")
    if row.seq0 + count - 1 > MAX_SAFE_INTEGER:
        raise ChunkRowError(f"{_row_name(row)}: last member's seq leaves the safe-integer range")
    if dt and min(dt) >= 0:
        # The usual case: times never go back, so the last member's time is the largest.
        lowest, highest = row.time0, row.time0 + sum(dt)
    else:
        times = list(accumulate(dt, initial=row.time0))
        lowest, highest = min(times), max(times)
    if lowest < -MAX_SAFE_INTEGER or highest > MAX_SAFE_INTEGER:
        raise ChunkRowError(f"{_row_name(row)}: a member's time leaves the safe-integer range")


def validate_row(row: ChunkRow) -> None:
    """Check a type-valid row against SPEC 2.1's remaining rules without expanding it."""
    if isinstance(row, ToolCallChunks):
        _check_members(row, len(row.data.args))
    else:
        _check_members(row, len(row.data.texts))


def expand_row(row: ChunkRow) -> list[AssistantChunk]:
    """The exact events a (type-valid) row stands for; raises `ChunkRowError` on a bad row.

    Built with `map` over the constructors so that the per-member work stays in C: decoding a
    long row costs a few object allocations per member and nothing more.
    """
    d = row.data
    chunks: Iterable[StreamChunk]
    if isinstance(row, ToolCallChunks):
        calls = row.data
        fragments = calls.args
        chunks = map(
            ToolCallDelta,
            repeat(calls.index),
            repeat(calls.id),
            fragments,
            repeat(calls.name),
        )
    else:
        fragments = row.data.texts
        delta = TextDelta if type(row) is TextChunks else ReasoningDelta
        chunks = map(delta, repeat(d.index), fragments)
    count = len(fragments)
    _check_members(row, count)
    times = accumulate(d.dt, initial=row.time0)
    datas = map(AssistantChunkData, repeat(d.turn), repeat(d.step), chunks)
    return list(map(AssistantChunk, range(row.seq0, row.seq0 + count), times, datas))


def _is_row_value(value: Any) -> bool:
    """Whether a parsed JSON value claims to be a chunk row (its `type` is a row tag)."""
    if not isinstance(value, dict):
        return False
    tag = value.get("type")
    return isinstance(tag, str) and tag in ROW_TYPES


def convert_row(value: Any) -> ChunkRow:
    """A parsed JSON value as a type-valid chunk row; raises `ChunkRowError` naming the row."""
    try:
        row: ChunkRow = msgspec.convert(value, ChunkRow)
    except msgspec.ValidationError as exc:
        raise ChunkRowError(f"{_row_name(value)}: {exc}") from None
    return row


_record_decoder: Final[msgspec.json.Decoder[_TypedRecord]] = msgspec.json.Decoder(_TypedRecord)
_json_decoder: Final = msgspec.json.Decoder()


def decode_record_json(raw: bytes | memoryview | str) -> StorageRecord:
    """One storage record from its JSON text, type-checked (rows are not yet expanded).

    Raises `ChunkRowError` for a malformed row and `EventError` for anything else malformed.
    """
    try:
        return _record_decoder.decode(raw)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise EventError(f"invalid JSON: {exc}") from None
    # Slow path, only for lines that failed: find out what kind of record it meant to be, so
    # that the error (or the ignorable unknown event) is the right one. A line can fail
    # validation before its JSON is seen to be malformed (`0"type": ...` is an int, then junk).
    try:
        value = _json_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise EventError(f"invalid JSON: {exc}") from None
    if _is_row_value(value):
        return convert_row(value)
    return convert_event(value)


def decode_storage_record(value: Any) -> Sequence[SessionEvent]:
    """The events one storage record stands for: a plain event as itself, a row expanded.

    `value` is a decoded record struct or a parsed JSON object. Raises `ChunkRowError` for a
    malformed row and `EventError` for a malformed event; nothing is returned on error.
    """
    if isinstance(value, ROW_CLASSES):
        return expand_row(value)
    if isinstance(value, msgspec.Struct):
        # A decoded record that is not a row is an event (`decode_record_json`'s types).
        return [cast(SessionEvent, value)]
    if _is_row_value(value):
        return expand_row(convert_row(value))
    return [convert_event(value)]


__all__ = [
    "MIN_RUN",
    "ChunkRow",
    "ChunkRowError",
    "EventError",
    "ReasoningChunks",
    "StorageRecord",
    "TextChunks",
    "TextChunksData",
    "ToolCallChunks",
    "ToolCallChunksData",
    "decode_record_json",
    "decode_storage_record",
    "expand_row",
    "pack_chunk_runs",
    "validate_row",
]
