"""Reading a whole JSONL session log (SPEC 2.2 to 2.5): its header and checked records.

A log is a header line followed by storage records (plain events and chunk rows), either as
plain JSON lines (`session.jsonl`) or as a sequence of Zstandard frames, one per append batch,
each holding whole lines (`session.jsonl.zst`). Reading never changes a file; a torn final
line (or frame) is left out. Only `LogWriter` (`writer.py`) changes a log.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import msgspec

from ...core.chunk_checks import (
    ChunkCheck,
    KeptRecord,
)
from ...core.chunk_rows import (
    StorageRecord,
    decode_storage_record,
)
from ...core.events import SessionEvent
from ...core.header import SessionHeader
from ..checked import LogRecords
from ..collection import collection_paused
from .lines import Compression, LogLines, MappedLines, log_compression

if TYPE_CHECKING:
    # Imported where a Zstandard log is read or written: most logs are plain.
    pass


class LogContents(msgspec.Struct, dict=True):
    """What a read found: the header, the records (rows left packed), where content ends."""

    header: SessionHeader
    records: list[StorageRecord]
    """Every body line, decoded and checked; rows are not expanded."""
    event_count: int
    valid_size: int
    """Byte length of the complete content; anything after it is a torn tail."""
    torn_tail: bool

    @cached_property
    def events(self) -> list[SessionEvent]:
        """The logical events, every row expanded (built on first use)."""
        return [event for record in self.records for event in decode_storage_record(record)]


def parse_log(
    path: Path | str,
    data: bytes,
    compression: Compression,
    progress: Callable[[int, int], None] | None = None,
) -> LogContents:
    """Decode a whole log from its bytes, checking every record and the seq chain."""
    return _contents(LogLines(path, io.BytesIO(data), compression, progress))


def read_log(path: Path | str, progress: Callable[[int, int], None] | None = None) -> LogContents:
    """Read a log without changing it; a torn final line (or frame) is ignored.

    `progress`, if given, is called now and then with the bytes read so far and the file's size.
    """
    path = Path(path)
    with open(path, "rb") as file:
        return read_log_file(path, file, progress)


def read_log_file(
    path: Path, file: BinaryIO, progress: Callable[[int, int], None] | None = None
) -> LogContents:
    """`read_log` from an open file (read from its start)."""
    return _contents(LogLines(path, file, log_compression(path), progress))


class KeptLog(msgspec.Struct):
    """What `read_kept_log` found: as `LogContents`, but the runs of chunk lines that matched
    their check are kept packed, and the long runs that had none have one made."""

    header: SessionHeader
    records: list[KeptRecord]
    event_count: int
    valid_size: int
    torn_tail: bool
    lines: int
    """Complete lines read, the header included."""
    used_checks: list[ChunkCheck]
    """The checks that matched."""
    new_checks: list[ChunkCheck]
    """Checks for the long runs that were decoded: what the check file lacked."""


def read_kept_log(lines: LogLines | MappedLines, checks: Mapping[int, ChunkCheck]) -> KeptLog:
    """`read_log_file` for a log about to be continued, with the chunk checks its writers
    recorded (`acp_server.core.chunk_checks`)."""
    reader = LogRecords(lines, lines if isinstance(lines, MappedLines) else None)
    with collection_paused():
        records = list(reader.kept(checks))
    return KeptLog(
        reader.header,
        records,
        reader.event_count,
        lines.valid_size,
        lines.torn_tail,
        lines.count,
        reader.used_checks,
        reader.new_checks,
    )


def _contents(lines: LogLines) -> LogContents:
    reader = LogRecords(lines)
    with collection_paused():
        records = list(reader)
    return LogContents(
        reader.header, records, reader.event_count, lines.valid_size, lines.torn_tail
    )
