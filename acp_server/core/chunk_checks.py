"""Chunk checks: what a log's writer records of each step's run of chunk lines, so that a later
load can trust those lines without decoding them.

A step's streamed chunks (chunk rows, and the plain `assistant/chunk` events a flush left
unpacked) are most of a session log's bytes, yet once the step has its `assistant/message`,
nothing a load shows comes from them. SPEC 2.5 still wants a malformed row refused before the
replay starts. A `ChunkCheck` lets a reader do that without decoding the lines: it names the
run's first line, how many lines it has and their size in bytes, the figures a reader needs of it
(first seq, event count, turn, step) and a CRC-32 over the lines' bytes and those figures. Lines whose CRC matches
are byte for byte the valid records their writer encoded, and become one `PackedChunks`: the
lines kept as they are, decoded only when their records are asked for. Lines without a
matching check are decoded and checked in full, as before: a check is a cache of that work,
never its replacement, so a stale, torn or missing check costs time and nothing else.

`ChunkRuns` finds the runs and makes their checks, the same way for a writer (as it writes
lines) and for a reader (as it decodes a log that lacks them). Pure functions over bytes;
where the checks are kept is the store's business.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Final, cast, final

import msgspec
from msgspec import UNSET

from .chunk_rows import (
    ROW_CLASSES,
    ChunkRow,
    ChunkRowError,
    StorageRecord,
    decode_record_json,
    validate_row,
)
from .events import AssistantChunk, EventError
from .paging import record_count, record_start

Line = bytes | memoryview
"""One line of a log, without its newline: a copy, or a view of a mapped file."""

MIN_CHECKED_EVENTS: Final = 64
"""Shorter runs get no check: decoding them costs about what checking them would."""


class ChunkCheck(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One run of chunk lines as its writer wrote it (stored as a JSON array, in this order)."""

    line: int
    """The number of the run's first line in the log (1-based: the header is line 1)."""
    lines: int
    size: int
    """The bytes of the lines, each with its newline: a mapped reader takes them at once."""
    crc: int
    """CRC-32 of the lines' bytes (each with its newline), then of the figures below."""
    seq0: int
    count: int
    """The events the lines stand for."""
    turn: int
    step: int


@final
class PackedChunks:
    """A run of chunk lines that matched its check: the lines as read (`text`, each with its
    newline), and its figures.

    `decode()` gives the records themselves, for the readers that need the chunks.
    """

    __slots__ = ("count", "number", "seq0", "step", "text", "turn")

    def __init__(self, check: ChunkCheck, text: Line) -> None:
        self.seq0 = check.seq0
        self.count = check.count
        self.turn = check.turn
        self.step = check.step
        self.number = check.line
        self.text = text

    def decode(self) -> list[StorageRecord]:
        """The run's records (rows left packed); `ChunkRowError` only if a line was changed in
        a way its CRC missed."""
        records: list[StorageRecord] = []
        seq = self.seq0
        lines = bytes(self.text).split(b"\n")[:-1]
        for number, line in enumerate(lines, start=self.number):
            try:
                record = decode_record_json(line)
                if type(record) in ROW_CLASSES:
                    validate_row(cast(ChunkRow, record))
            except (ChunkRowError, EventError) as exc:
                raise ChunkRowError(f"line {number}: {exc}") from None
            if _chunk_of(record) != (self.turn, self.step) or record_start(record) != seq:
                raise ChunkRowError(f"line {number}: not the chunk its check describes")
            seq += record_count(record)
            records.append(record)
        if seq != self.seq0 + self.count:
            raise ChunkRowError(f"line {self.number}: the run is not the one its check describes")
        return records

    def __repr__(self) -> str:
        return f"PackedChunks(seq0={self.seq0}, count={self.count}, bytes={len(self.text)})"


KeptRecord = StorageRecord | PackedChunks
"""A record as the reader of a log about to be continued keeps it: decoded, or packed chunks."""


def _chunk_of(record: object) -> tuple[int, int] | None:
    """(turn, step) of a record that may be part of a checked run, else None: a chunk row, or a
    plain `assistant/chunk` with nothing a reader must check beyond its type (no
    `sourceRange`, no `ignorable`)."""
    kind = type(record)
    if kind in ROW_CLASSES:
        data = cast(ChunkRow, record).data
        return data.turn, data.step
    if kind is AssistantChunk:
        chunk = cast(AssistantChunk, record)
        if chunk.source_range is UNSET and chunk.ignorable is UNSET:
            return chunk.data.turn, chunk.data.step
    return None


def _figures_crc(crc: int, seq0: int, count: int, turn: int, step: int) -> int:
    return zlib.crc32(b"%d %d %d %d" % (seq0, count, turn, step), crc)


def packed_text(check: ChunkCheck, text: Line) -> PackedChunks | None:
    """The run whose lines, each with its newline, are `text`, if it is the one `check`
    describes; else None (decode its lines in full)."""
    if check.count < 1 or len(text) != check.size:
        return None
    crc = zlib.crc32(text)
    if _figures_crc(crc, check.seq0, check.count, check.turn, check.step) != check.crc:
        return None
    return PackedChunks(check, text)


def packed_chunks(check: ChunkCheck, lines: list[Line]) -> PackedChunks | None:
    """`packed_text` for the run of `lines` (without their newlines)."""
    if len(lines) != check.lines:
        return None
    return packed_text(check, b"\n".join([*lines, b""]))


class ChunkRuns:
    """Finds the runs of chunk lines of a log read or written line by line, and makes the check
    of each run of at least `min_events` events."""

    __slots__ = (
        "_count",
        "_crc",
        "_line",
        "_lines",
        "_seq0",
        "_size",
        "_step",
        "_turn",
        "min_events",
    )

    def __init__(self, min_events: int = MIN_CHECKED_EVENTS) -> None:
        self.min_events = min_events
        self._lines = 0
        """Lines in the open run (0: none is open)."""
        self._line = self._crc = self._seq0 = self._count = self._turn = self._step = 0
        self._size = 0

    @property
    def open_lines(self) -> int:
        """Lines in the open run (0: none is open): 1 right after a line started a run."""
        return self._lines

    def feed(self, number: int, line: Line, record: StorageRecord) -> ChunkCheck | None:
        """Take line `number`, `record`'s JSON (without its newline); the check of the run it
        ends, if any."""
        chunk = _chunk_of(record)
        if chunk is None:
            return self.end()
        return self.feed_chunk(number, line, record_start(record), record_count(record), *chunk)

    def feed_chunk(
        self, number: int, line: Line, seq0: int, count: int, turn: int, step: int
    ) -> ChunkCheck | None:
        """`feed` for a line known to be a chunk record (what `_chunk_of` accepts) of `turn`
        and `step`, standing for `count` events from `seq0`: a reader's hot path."""
        if (
            self._lines
            and turn == self._turn
            and step == self._step
            and seq0 == self._seq0 + self._count
            and number == self._line + self._lines
        ):
            self._lines += 1
            self._count += count
            self._size += len(line) + 1
            self._crc = zlib.crc32(b"\n", zlib.crc32(line, self._crc))
            return None
        ended = self.end()
        self._line, self._lines, self._seq0, self._count = number, 1, seq0, count
        self._turn, self._step, self._size = turn, step, len(line) + 1
        self._crc = zlib.crc32(b"\n", zlib.crc32(line))
        return ended

    def end(self) -> ChunkCheck | None:
        """End the open run (a non-chunk line, a failed write, the end of the log); its check,
        if it is long enough."""
        lines, self._lines = self._lines, 0
        if not lines or self._count < self.min_events:
            return None
        crc = _figures_crc(self._crc, self._seq0, self._count, self._turn, self._step)
        return ChunkCheck(
            self._line, lines, self._size, crc, self._seq0, self._count, self._turn, self._step
        )

    def feed_all(
        self, first: int, lines: Sequence[Line], records: Sequence[StorageRecord]
    ) -> list[ChunkCheck]:
        """`feed` for consecutive lines from line `first` on; the checks of the runs they end."""
        checks = []
        for number, (line, record) in enumerate(zip(lines, records, strict=True), start=first):
            check = self.feed(number, line, record)
            if check is not None:
                checks.append(check)
        return checks


_checks_decoder: Final = msgspec.json.Decoder(ChunkCheck)
_encoder: Final = msgspec.json.Encoder()


def encode_checks(checks: Sequence[ChunkCheck]) -> bytes:
    """Checks as JSON lines, each ending in a newline."""
    return b"".join([_encoder.encode(check) + b"\n" for check in checks])


def decode_checks(data: bytes) -> dict[int, ChunkCheck]:
    """The checks of a check file's bytes by first line, the last of each line winning; a line
    that is not a check (torn, or changed) is left out: it only makes its run slower to load."""
    checks: dict[int, ChunkCheck] = {}
    decode = _checks_decoder.decode
    for raw in data.split(b"\n"):
        if not raw:
            continue
        try:
            check = decode(raw)
        except msgspec.DecodeError:
            continue
        checks[check.line] = check
    return checks
