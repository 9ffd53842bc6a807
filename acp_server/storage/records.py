"""The one check of stored records (SPEC 2.1 to 2.3), whatever reads them.

Loads (every engine), the JSONL history index and `log verify` all check a log's records
through `RecordChecker`: each body line decoded and type-checked, each row validated against
SPEC 2.1, the seq chain followed from record to record, each `sourceRange` checked against
SPEC 1.1. It does no I/O: it is fed lines (or records already decoded) and their positions.

It fails fast (the first problem raises `CorruptLog`, what a load does) or collects (every
problem kept as a `Problem`, what `log verify` reports): after a line that cannot be decoded,
a collecting checker takes the seq chain up again from the next record it can read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final, cast

import msgspec

from ..core.chunk_checks import Line
from ..core.chunk_rows import (
    ChunkRow,
    ChunkRowError,
    ReasoningChunks,
    StorageRecord,
    TextChunks,
    ToolCallChunks,
    decode_record_json,
    validate_row,
)
from ..core.events import EventError, KnownEvent, ToolCall, UnknownEvent
from ..core.header import SESSION_FORMAT_VERSION, SessionHeader
from ..core.source_range import source_range_problem
from ..core.structs import MAX_SAFE_INTEGER
from .errors import CorruptLog, UnsupportedVersion

_json_decoder: Final = msgspec.json.Decoder()

LineNumber = Callable[[int], int]
"""The (1-based) line number of the record at a position, asked only for an error."""


def _same(position: int) -> int:
    return position


class Problem(msgspec.Struct):
    """One problem found, on the line it names."""

    line: int
    message: str


def seq_problem(expected: int, found: int, *, overlap: bool = False) -> str:
    """The message of a break in the seq chain (a load calls every break a gap; `log verify`
    tells an `overlap` apart)."""
    what = "overlap" if overlap and found < expected else "gap"
    return f"seq {what}: expected seq {expected}, found {found}"


class RecordChecker:
    """Checks consecutive records of one log, fed in order.

    `expected` is the seq the next record must start at (None: whatever the next record
    starts at, as for a reader that starts in the middle of a log). With `calls` (a reader
    that reads from the first record), a `tool/result`'s range is checked against the
    `tool/call` it names; without, for its shape only. Positions given to `line` and `record`
    are line numbers unless `where` maps them to one. After each record, `start` is its first
    seq and `expected` one past its last.
    """

    def __init__(
        self,
        name: Path | str,
        *,
        collect: bool = False,
        expected: int | None = 0,
        calls: bool = True,
        where: LineNumber = _same,
    ) -> None:
        self.name = name
        self.collect = collect
        self.expected = expected
        self.start = 0
        self.where = where
        self.problems: list[Problem] = []
        """What a collecting checker found, in order."""
        self._call_ids: dict[int, str] | None = {} if calls else None

    def fail(self, position: int, reason: str) -> None:
        """A problem at `position`: raised (`CorruptLog`), or kept when collecting."""
        line = self.where(position)
        if not self.collect:
            raise CorruptLog(self.name, line, reason)
        self.problems.append(Problem(line, reason))

    def line(self, position: int, raw: Line) -> StorageRecord | None:
        """The record of one stored line, decoded and checked (None: it could not be read,
        and the checker collects)."""
        try:
            record = decode_record_json(raw)
        except (ChunkRowError, EventError) as exc:
            self._unreadable(position, str(exc))
            return None
        return record if self.record(position, record) else None

    def record(self, position: int, record: StorageRecord) -> bool:
        """Check one decoded record; False if it is a row that breaks SPEC 2.1 (its events
        are unknown: a collecting checker takes the chain up again after it)."""
        # This runs once per stored record of every read (a long session has hundreds of
        # thousands): `type() is` and a quick bound on rows, which passes SPEC 2.1's row rules
        # without `validate_row` when no member's time goes back.
        kind = type(record)
        is_row = kind is TextChunks or kind is ReasoningChunks or kind is ToolCallChunks
        if is_row:
            row = cast(ChunkRow, record)
            dt = row.data.dt
            count = (
                len(cast(ToolCallChunks, row).data.args)
                if kind is ToolCallChunks
                else len(cast("TextChunks | ReasoningChunks", row).data.texts)
            )
            start, time0 = row.seq0, row.time0
            if (
                len(dt) + 1 != count
                or start + count > MAX_SAFE_INTEGER + 1
                or time0 < -MAX_SAFE_INTEGER
                or time0 + sum(dt) > MAX_SAFE_INTEGER
                or (dt and min(dt) < 0)
            ):
                try:
                    validate_row(row)
                except ChunkRowError as exc:
                    self._unreadable(position, str(exc))
                    return False
        else:
            start, count = cast("KnownEvent | UnknownEvent", record).seq, 1
        expected = self.expected
        if start != expected and expected is not None:
            self.fail(position, seq_problem(expected, start, overlap=self.collect))
        self.start = start
        self.expected = start + count
        if is_row:
            return True
        if type(getattr(record, "source_range", None)) is tuple:
            problem = source_range_problem(record, start, self._call_ids)
            if problem is not None:
                self.fail(position, problem)
        if kind is ToolCall and self._call_ids is not None:
            self._call_ids[start] = cast(ToolCall, record).data.call_id
        return True

    def _unreadable(self, position: int, reason: str) -> None:
        self.fail(position, reason)
        self.expected = None


def parse_header(path: Path | str, raw: Line) -> SessionHeader:
    """Decode line 1. The version is checked before anything else, so that a log from another
    version reads as unsupported rather than corrupt."""
    try:
        value = _json_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise CorruptLog(path, 1, f"header is not valid JSON: {exc}") from None
    if not isinstance(value, dict) or value.get("type") != "session":
        raise CorruptLog(
            path, 1, 'the first line is not a session header ({"type": "session", ...})'
        )
    if "version" not in value:
        raise CorruptLog(path, 1, "the header has no version")
    version = value["version"]
    if type(version) is not int or version != SESSION_FORMAT_VERSION:
        raise UnsupportedVersion(path, version)
    try:
        return msgspec.convert(value, SessionHeader)
    except msgspec.ValidationError as exc:
        raise CorruptLog(path, 1, f"invalid header: {exc}") from None
