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
from typing import Annotated, Any, Final, Union

import msgspec
from msgspec import UNSET, Meta, UnsetType

from .events import (
    MAX_SAFE_INTEGER,
    AssistantChunk,
    AssistantChunkData,
    KnownEvent,
    Model,
    ReasoningDelta,
    SafeInt,
    Seq,
    SessionEvent,
    Tagged,
    TextDelta,
    ToolCallDelta,
    UnknownEvent,
    convert_event,
    EventError,
)

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


ChunkRow = Union[TextChunks, ReasoningChunks, ToolCallChunks]
StorageRecord = Union[KnownEvent, ChunkRow, UnknownEvent]
"""One body line of a session log: a plain event or a chunk row."""

_TypedRecord = Union[KnownEvent, ChunkRow]

ROW_TYPES: Final[frozenset[str]] = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})


class ChunkRowError(ValueError):
    """A chunk row breaks a rule of SPEC 2.1; the message names the row and the rule."""


# ---------------------------------------------------------------------------------------------
# Packing.

_DELTA_ROW: Final = {TextDelta: TextChunks, ReasoningDelta: ReasoningChunks}


def _packable_chunk(event: SessionEvent) -> TextDelta | ReasoningDelta | ToolCallDelta | None:
    """The delta chunk of an event that may join a row, or None for an event that stays plain."""
    if type(event) is not AssistantChunk or event.ignorable is not UNSET:
        return None
    if event.source_range is not UNSET:
        return None
    chunk = event.data.chunk
    if type(chunk) in (TextDelta, ReasoningDelta, ToolCallDelta):
        return chunk  # type: ignore[return-value]
    return None


def _continues(prev: AssistantChunk, event: AssistantChunk) -> bool:
    a, b = prev.data, event.data
    ca, cb = a.chunk, b.chunk
    if type(ca) is not type(cb) or event.seq != prev.seq + 1:
        return False
    if abs(event.time - prev.time) > MAX_SAFE_INTEGER:
        return False
    if a.turn != b.turn or a.step != b.step or ca.index != cb.index:
        return False
    if type(ca) is ToolCallDelta:
        return ca.id == cb.id and ca.name == cb.name  # type: ignore[union-attr]
    return True


def _make_row(run: Sequence[AssistantChunk]) -> ChunkRow:
    first = run[0]
    times = [e.time for e in run]
    dt = [t - s for s, t in zip(times, times[1:])]
    d = first.data
    chunk = d.chunk
    if type(chunk) is ToolCallDelta:
        return ToolCallChunks(
            first.seq,
            first.time,
            ToolCallChunksData(
                turn=d.turn,
                step=d.step,
                index=chunk.index,
                dt=dt,
                id=chunk.id,
                name=chunk.name,
                args=[e.data.chunk.arguments_delta for e in run],  # type: ignore[union-attr]
            ),
        )
    row_type = _DELTA_ROW[type(chunk)]
    return row_type(
        first.seq,
        first.time,
        TextChunksData(d.turn, d.step, chunk.index, dt, [e.data.chunk.text for e in run]),  # type: ignore[union-attr]
    )


def pack_chunk_runs(events: Iterable[SessionEvent]) -> list[StorageRecord]:
    """Pack every run of at least `MIN_RUN` eligible delta chunks into a row.

    Every other event passes through unchanged and in place. The result is canonical: it depends
    only on the logical events, never on how they were stored before.
    """
    records: list[StorageRecord] = []
    run: list[AssistantChunk] = []

    def close_run() -> None:
        if len(run) >= MIN_RUN:
            records.append(_make_row(run))
        else:
            records.extend(run)
        run.clear()

    for event in events:
        if _packable_chunk(event) is None:
            if run:
                close_run()
            records.append(event)
            continue
        if run and not _continues(run[-1], event):  # type: ignore[arg-type]
            close_run()
        run.append(event)  # type: ignore[arg-type]
    if run:
        close_run()
    return records


# ---------------------------------------------------------------------------------------------
# Decoding.


def _row_name(value: Any) -> str:
    """How an error names a row: its type and first seq, as far as they can be read."""
    if isinstance(value, (TextChunks, ReasoningChunks, ToolCallChunks)):
        return f"{value.__struct_config__.tag} row (seq0={value.seq0})"
    if isinstance(value, dict):
        return f"{value.get('type', 'chunk')} row (seq0={value.get('seq0', '?')!r})"
    return "chunk row"


def _member_times(row: ChunkRow, count: int) -> list[int]:
    name = _row_name(row)
    dt = row.data.dt
    if len(dt) != count - 1:
        raise ChunkRowError(f"{name}: dt has {len(dt)} entries, expected {count - 1}")
    if row.seq0 + count - 1 > MAX_SAFE_INTEGER:
        raise ChunkRowError(f"{name}: last member's seq leaves the safe-integer range")
    times = list(accumulate(dt, initial=row.time0))
    if min(times) < -MAX_SAFE_INTEGER or max(times) > MAX_SAFE_INTEGER:
        raise ChunkRowError(f"{name}: a member's time leaves the safe-integer range")
    return times


def expand_row(row: ChunkRow) -> list[AssistantChunk]:
    """The exact events a (type-valid) row stands for; raises `ChunkRowError` on a bad row.

    Built with `map` over the constructors so that the per-member work stays in C: decoding a
    long row costs a few object allocations per member and nothing more.
    """
    d = row.data
    if type(row) is ToolCallChunks:
        fragments = d.args  # type: ignore[union-attr]
        chunks: Iterable[Any] = map(
            ToolCallDelta, repeat(d.index), repeat(d.id), fragments, repeat(d.name)  # type: ignore[union-attr]
        )
    else:
        fragments = d.texts  # type: ignore[union-attr]
        delta = TextDelta if type(row) is TextChunks else ReasoningDelta
        chunks = map(delta, repeat(d.index), fragments)
    count = len(fragments)
    times = _member_times(row, count)
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
        return msgspec.convert(value, ChunkRow)
    except msgspec.ValidationError as exc:
        raise ChunkRowError(f"{_row_name(value)}: {exc}") from None


_record_decoder: Final = msgspec.json.Decoder(_TypedRecord)
_json_decoder: Final = msgspec.json.Decoder()


def decode_record_json(raw: bytes | str) -> StorageRecord:
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
    # that the error (or the ignorable unknown event) is the right one.
    value = _json_decoder.decode(raw)
    if _is_row_value(value):
        return convert_row(value)
    return convert_event(value)


def decode_storage_record(value: Any) -> list[SessionEvent]:
    """The events one storage record stands for: a plain event as itself, a row expanded.

    `value` is a decoded record struct or a parsed JSON object. Raises `ChunkRowError` for a
    malformed row and `EventError` for a malformed event; nothing is returned on error.
    """
    if isinstance(value, (TextChunks, ReasoningChunks, ToolCallChunks)):
        return expand_row(value)  # type: ignore[return-value]
    if isinstance(value, msgspec.Struct):
        return [value]  # type: ignore[list-item]
    if _is_row_value(value):
        return expand_row(convert_row(value))  # type: ignore[return-value]
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
]
