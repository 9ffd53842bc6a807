"""An index of a session log on disk, so history pages read only what they show.

Building the index reads every line once with a probe decoder that skips the fragments of
chunk rows: it keeps, per record, its first seq and where its line is, and per message its
seq and the lowest seq of its chunks. A page then reads and decodes just the lines it covers,
and a row is split only where a page boundary cuts it. The index grows with the file: a later
`refresh()` reads only the lines appended since.

A Zstandard log is indexed frame by frame; a page decompresses only the frames it needs.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec
import zstandard

from ..core.chunk_rows import (
    ROW_CLASSES,
    ChunkRowError,
    StorageRecord,
    decode_record_json,
    pack_chunk_runs,
    validate_row,
)
from ..core.events import EventError
from ..core.header import SessionHeader
from ..core.paging import PageCut, clip_records, page_cut
from .log import CorruptLog, zstd_frame_end, log_compression, parse_header

_MESSAGE_TYPES: Final = frozenset({"user/message", "assistant/message"})
_ROW_TYPES: Final = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})


class _ProbeData(msgspec.Struct, rename="camel"):
    dt: list[int] | None = None
    child_session_id: str | None = None


class _Probe(msgspec.Struct, rename="camel"):
    """The few fields of a record the index needs; everything else is skipped unparsed."""

    type: str = ""
    seq: int = -1
    seq0: int = -1
    source_range: tuple[int, int] | None = None
    data: _ProbeData | None = None


_probe: Final = msgspec.json.Decoder(_Probe)


@dataclass
class LogIndex:
    path: Path
    header: SessionHeader
    compressed: bool
    starts: array = field(default_factory=lambda: array("q"))
    """First seq of each record."""
    offsets: array = field(default_factory=lambda: array("q"))
    """Plain logs: the byte offset of each record's line. Zstandard: offset in its frame."""
    lengths: array = field(default_factory=lambda: array("q"))
    frames: array = field(default_factory=lambda: array("q"))
    """Zstandard logs: the frame (index into `frame_offsets`) holding each record."""
    frame_offsets: array = field(default_factory=lambda: array("q"))
    frame_ends: array = field(default_factory=lambda: array("q"))
    message_seqs: array = field(default_factory=lambda: array("q"))
    message_cuts: array = field(default_factory=lambda: array("q"))
    subagent_children: set[str] = field(default_factory=set)
    length: int = 0
    """How many events the indexed records stand for."""
    indexed_bytes: int = 0
    """How far into the file the index reaches (the start of any torn tail)."""
    lines: int = 1

    @classmethod
    def build(cls, path: Path) -> "LogIndex":
        compressed = log_compression(path) == "zstd"
        with open(path, "rb") as file:
            data = file.read()
        index = cls(path, _header_of(path, data, compressed), compressed)
        index._scan(data)
        return index

    @property
    def last_seq(self) -> int:
        return self.length - 1

    def refresh(self) -> None:
        """Index what was appended to the file since the last scan."""
        size = self.path.stat().st_size
        if size == self.indexed_bytes:
            return
        with open(self.path, "rb") as file:
            file.seek(self.indexed_bytes)
            tail = file.read()
        self._scan(tail, base=self.indexed_bytes)

    # -- scanning ------------------------------------------------------------------------------

    def _scan(self, data: bytes, base: int = 0) -> None:
        if self.compressed:
            self._scan_frames(data, base)
        else:
            self._scan_lines(data, base, frame=-1)

    def _scan_frames(self, data: bytes, base: int) -> None:
        view = memoryview(data)
        decompressor = zstandard.ZstdDecompressor()
        offset = 0
        while offset < len(data):
            try:
                end = zstd_frame_end(view, offset)
            except ValueError as exc:
                raise CorruptLog(self.path, self.lines, f"at byte {base + offset}: {exc}") from None
            if end is None:
                break
            try:
                text = decompressor.decompressobj().decompress(view[offset:end])
            except zstandard.ZstdError as exc:
                raise CorruptLog(self.path, self.lines, f"frame at byte {base + offset}: {exc}") from None
            frame = len(self.frame_offsets)
            self.frame_offsets.append(base + offset)
            self.frame_ends.append(base + end)
            skip_header = base + offset == 0
            self._scan_lines(text, 0, frame=frame, skip_header=skip_header)
            offset = end
            self.indexed_bytes = base + end

    def _scan_lines(self, data: bytes, base: int, *, frame: int, skip_header: bool | None = None) -> None:
        position = 0
        first_file_line = base == 0 and frame < 0 if skip_header is None else skip_header
        while True:
            newline = data.find(b"\n", position)
            if newline < 0:
                break  # a torn tail (plain logs) is left for a later refresh
            line = data[position:newline]
            if first_file_line:
                first_file_line = False
            else:
                self.lines += 1
                self._add(line, (base + position) if frame < 0 else position, newline - position, frame)
            position = newline + 1
            if frame < 0:
                self.indexed_bytes = base + position

    def _add(self, line: bytes, offset: int, length: int, frame: int) -> None:
        try:
            probe = _probe.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptLog(self.path, self.lines, f"invalid record: {exc}") from None
        is_row = probe.type in _ROW_TYPES
        start = probe.seq0 if is_row else probe.seq
        if start != self.length:
            raise CorruptLog(self.path, self.lines, f"seq gap: expected seq {self.length}, found {start}")
        if is_row:
            dt = probe.data.dt if probe.data is not None else None
            if dt is None:
                raise CorruptLog(self.path, self.lines, f"{probe.type} row has no dt")
            count = len(dt) + 1
        else:
            count = 1
            if probe.type in _MESSAGE_TYPES:
                source = probe.source_range
                self.message_seqs.append(start)
                self.message_cuts.append(min(start, source[0]) if source is not None else start)
            elif probe.type == "subagent/start" and probe.data is not None and probe.data.child_session_id:
                self.subagent_children.add(probe.data.child_session_id)
        self.starts.append(start)
        self.offsets.append(offset)
        self.lengths.append(length)
        self.frames.append(frame)
        self.length = start + count

    # -- reading pages -------------------------------------------------------------------------

    def page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        """SPEC 3.1's page ending before `end`, read from disk: its canonical records."""
        cut = page_cut(self.message_seqs, self.message_cuts, end, max_messages)
        return cut, self.records_between(cut.start, cut.end)

    def records_between(self, lo: int, hi: int) -> list[StorageRecord]:
        """The canonical packing of the events in `[lo, hi)`, decoding only their lines."""
        if lo >= hi:
            return []
        first = max(bisect_right(self.starts, lo) - 1, 0)
        last = bisect_left(self.starts, hi)
        records = self._read(first, last)
        starts = self.starts[first:last]
        return pack_chunk_runs(clip_records(records, starts, lo, hi))

    def _read(self, first: int, last: int) -> list[StorageRecord]:
        records: list[StorageRecord] = []
        frame_cache: dict[int, bytes] = {}
        with open(self.path, "rb") as file:
            for i in range(first, last):
                offset, length = self.offsets[i], self.lengths[i]
                if self.compressed:
                    frame = self.frames[i]
                    text = frame_cache.get(frame)
                    if text is None:
                        frame_cache.clear()  # records are read in order: one frame at a time
                        file.seek(self.frame_offsets[frame])
                        raw = file.read(self.frame_ends[frame] - self.frame_offsets[frame])
                        text = frame_cache[frame] = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
                    line = text[offset : offset + length]
                else:
                    file.seek(offset)
                    line = file.read(length)
                try:
                    record = decode_record_json(line)
                    if type(record) in ROW_CLASSES:
                        validate_row(record)  # type: ignore[arg-type]
                except (ChunkRowError, EventError) as exc:
                    raise CorruptLog(self.path, i + 2, str(exc)) from None
                records.append(record)
        return records


def _header_of(path: Path, data: bytes, compressed: bool) -> SessionHeader:
    if compressed:
        end = zstd_frame_end(memoryview(data), 0) if data else None
        if end is None:
            raise CorruptLog(path, 1, "the log has no complete header line")
        text = zstandard.ZstdDecompressor().decompressobj().decompress(data[:end])
    else:
        text = data
    newline = text.find(b"\n")
    if newline < 0:
        raise CorruptLog(path, 1, "the log has no complete header line")
    return parse_header(path, text[:newline])
