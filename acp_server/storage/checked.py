"""Stored records read from their lines, checked as they are read: how every engine loads a
session (a JSONL log's lines, a database's rows read as the lines a log would hold).

`LogRecords` reads the header line then the records; `CheckedRecords` the records alone, each
checked by the one `RecordChecker`, with the writers' chunk checks when they are known (a run
of chunk lines that matches its check is kept packed, not decoded).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from msgspec import UNSET

from ..core.chunk_checks import (
    ChunkCheck,
    ChunkRuns,
    KeptRecord,
    Line,
    PackedChunks,
    packed_chunks,
    packed_text,
)
from ..core.chunk_rows import (
    ROW_CLASSES,
    ChunkRow,
    StorageRecord,
)
from ..core.events import AssistantChunk
from .errors import CorruptLog
from .records import RecordChecker, parse_header, seq_problem

if TYPE_CHECKING:
    # Imported where a Zstandard log is read or written: most logs are plain.
    pass


class Lines(Protocol):
    """Complete lines of a log, header first, as `LogLines` or `MappedLines` give them (or a
    database's rows)."""

    @property
    def path(self) -> Path | str: ...

    @property
    def count(self) -> int:
        """Lines yielded so far."""

    @property
    def torn_tail(self) -> bool: ...

    def __iter__(self) -> Iterator[Line]: ...


class MappedRuns(Protocol):
    """Lines read from a memory map (a JSONL log's `MappedLines`), whose runs of lines can be
    taken whole, never split into lines."""

    def run_text(self, size: int) -> memoryview | None:
        """The `size` bytes from the start of the line yielded last, if they are whole lines."""

    def skip_run(self, size: int, lines: int) -> None:
        """Go on after the run `run_text(size)` gave, of `lines` lines."""


class LogRecords:
    """A log's header, then its records one at a time, each checked as it is read.

    Every body line is decoded and type-checked, its rows validated, its seq checked against
    the chain and its `sourceRange` against SPEC 1.1; the first problem raises `CorruptLog`
    naming the line. `event_count` counts the events of the records read so far.
    """

    def __init__(self, lines: Lines, mapped: MappedRuns | None = None) -> None:
        self.lines = lines
        iterator = iter(lines)
        first = next(iterator, None)
        if first is None:
            raise CorruptLog(lines.path, 1, "the log has no complete header line")
        self.header = parse_header(lines.path, first)
        self._checked = CheckedRecords(lines.path, iterator, mapped)

    @property
    def event_count(self) -> int:
        return self._checked.event_count

    @property
    def torn_tail(self) -> bool:
        return self.lines.torn_tail

    def __iter__(self) -> Iterator[StorageRecord]:
        return iter(self._checked)

    def kept(self, checks: Mapping[int, ChunkCheck]) -> Iterator[KeptRecord]:
        """The records read with the writers' chunk checks (see `CheckedRecords.kept`)."""
        return self._checked.kept(checks)

    @property
    def used_checks(self) -> list[ChunkCheck]:
        return self._checked.used_checks

    @property
    def new_checks(self) -> list[ChunkCheck]:
        return self._checked.new_checks


class CheckedRecords:
    """The records of consecutive body lines (line 2 on), each decoded and checked as
    `LogRecords` checks them: every engine reads its stored records through this.

    `kept(checks)` reads them with the chunk checks of the log's writers: a run of chunk lines
    that matches its check is kept packed (`PackedChunks`), not decoded; the lines of a run
    without a matching check are decoded and checked, and the run's check made
    (`new_checks`). A run that gets a check is then kept packed too: its records are dropped
    once checked, as a later read would not have decoded them."""

    def __init__(
        self, path: Path | str, lines: Iterable[Line], mapped: MappedRuns | None = None
    ) -> None:
        self.path = path
        self.lines = lines
        self.mapped = mapped
        """The map `lines` come from, if they do: a matching run is then taken at once."""
        self.event_count = 0
        self._check = RecordChecker(path)
        self.used_checks: list[ChunkCheck] = []
        """The checks that matched (`kept`)."""
        self.new_checks: list[ChunkCheck] = []
        """The checks made for runs that had none that matched (`kept`)."""

    def __iter__(self) -> Iterator[StorageRecord]:
        # Without checks, no line is kept packed.
        return cast(Iterator[StorageRecord], self._records(enumerate(self.lines, start=2), None))

    def kept(self, checks: Mapping[int, ChunkCheck]) -> Iterator[KeptRecord]:
        lines = self._packed(checks) if checks else enumerate(self.lines, start=2)
        return self._records(lines, ChunkRuns())

    def _packed(
        self, checks: Mapping[int, ChunkCheck]
    ) -> Iterator[tuple[int, Line] | PackedChunks]:
        """The numbered lines, each run that matches its check as one `PackedChunks`."""
        mapped = self.mapped
        lines = iter(self.lines)
        number = 1
        for raw in lines:
            number += 1
            check = checks.get(number)
            if check is None:
                yield number, raw
                continue
            if mapped is not None:
                # The run's bytes at once, from the map: its lines are never split.
                text = mapped.run_text(check.size)
                packed = packed_text(check, text) if text is not None else None
                if packed is None:
                    yield number, raw  # the run's other lines follow one by one
                    continue
                mapped.skip_run(check.size, check.lines)
            else:
                run = [raw, *itertools.islice(lines, check.lines - 1)]
                packed = packed_chunks(check, run)
                if packed is None:
                    yield from enumerate(run, start=number)
                    number += len(run) - 1
                    continue
            number += check.lines - 1
            self.used_checks.append(check)
            yield packed

    def _records(
        self, items: Iterable[tuple[int, Line] | PackedChunks], runs: ChunkRuns | None
    ) -> Iterator[KeptRecord]:
        check = self._check
        # With `runs`, the records and lines of the open run of chunk lines, held until the run
        # ends: a run that gets a check is yielded as its `PackedChunks` instead.
        run_records: list[StorageRecord] = []
        run_lines: list[Line] = []
        for item in items:
            if type(item) is PackedChunks:
                if item.seq0 != check.expected:
                    check.fail(item.number, seq_problem(self.event_count, item.seq0))
                if runs is not None:
                    # The packed run is a run of its own.
                    yield from self._ended_run(runs.end(), run_records, run_lines)
                check.expected = self.event_count = item.seq0 + item.count
                yield item
                continue
            number, raw = item
            record = cast(StorageRecord, check.line(number, raw))  # it fails fast
            first, expected = check.start, cast(int, check.expected)
            self.event_count = expected
            if runs is None:
                yield record
                continue
            # `ChunkRuns.feed`, with what the checker knows of the record already.
            kind = type(record)
            if kind in ROW_CLASSES:
                data = cast(ChunkRow, record).data
                made = runs.feed_chunk(number, raw, first, expected - first, data.turn, data.step)
            elif (
                kind is AssistantChunk
                and cast(AssistantChunk, record).source_range is UNSET
                and cast(AssistantChunk, record).ignorable is UNSET
            ):
                chunk = cast(AssistantChunk, record).data
                made = runs.feed_chunk(number, raw, first, 1, chunk.turn, chunk.step)
            else:
                yield from self._ended_run(runs.end(), run_records, run_lines)
                yield record
                continue
            if runs.open_lines == 1:  # the record starts a run: the one before it has ended
                yield from self._ended_run(made, run_records, run_lines)
            run_records.append(record)
            run_lines.append(raw)
        # A run still open at the end of the log is a step still streaming: it gets no check.
        yield from run_records

    def _ended_run(
        self, check: ChunkCheck | None, records: list[StorageRecord], lines: list[Line]
    ) -> Iterator[KeptRecord]:
        """The records of a run of chunk lines that has ended, then empties `records` and
        `lines`: as one `PackedChunks` when `check` (made from those lines) is its check."""
        packed = None
        if check is not None:
            self.new_checks.append(check)
            packed = packed_chunks(check, lines)
        if packed is not None:
            yield packed
        else:
            yield from records
        records.clear()
        lines.clear()
