"""`acp-server log stats|verify|cat PATH | --store URL SESSION_ID`: inspect a session log
without reading our code.

PATH is a session directory, a `session.jsonl` or a `session.jsonl.zst`; with `--store`, the
session is read from the store the URL names (SPEC 2.6), a database's rows read as the lines a
JSONL log would hold. `verify` keeps going
after a problem so that one run reports every problem with its line number (exit status 1),
where loading a log stops at the first. `stats` and `cat` read the log as the server would
(a torn final line ignored) and fail on the first problem, with its line; `cat` writes as it
reads, so what came before that line is already out. All three read the log one line (or
zstd frame) at a time: their memory does not grow with the file.
"""

from __future__ import annotations

import io
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO, cast

import msgspec

from ..core.chunk_checks import Line
from ..core.chunk_rows import (
    ROW_CLASSES,
    StorageRecord,
    decode_storage_record,
    pack_chunk_runs,
)
from ..core.events import (
    AssistantChunk,
    SessionEvent,
    TurnEnd,
    TurnStart,
    UnknownEvent,
    encode_event,
    event_type,
)
from ..core.paging import record_count
from ..paths import unreachable
from ..storage.checked import Lines, LogRecords
from ..storage.errors import CorruptLog, LogError, UnsupportedVersion
from ..storage.jsonl.lines import (
    PLAIN_LOG_NAME,
    ZSTD_LOG_NAME,
    Compression,
    LogLines,
    log_compression,
)
from ..storage.jsonl.writer import encode_records
from ..storage.records import Problem, RecordChecker, parse_header
from .outcome import CANNOT_RUN, failure_status

PROGRESS_THRESHOLD: Final = 16 * 1024 * 1024
"""Logs larger than this (bytes on disk) get a progress bar on stderr."""

if TYPE_CHECKING:
    from ..storage.api import SessionLines
    from ..storage.url import StoreUrl


class UsageError(Exception):
    """A PATH that is not a log: reported as one line, exit status 2."""


def resolve_log_path(path: Path) -> Path:
    """The log file PATH names: itself, or the log inside a session directory."""
    if path.is_dir():
        for name in (PLAIN_LOG_NAME, ZSTD_LOG_NAME):
            if (path / name).is_file():
                return path / name
        raise UsageError(f"{path}: no {PLAIN_LOG_NAME} or {ZSTD_LOG_NAME} in this directory")
    if not path.exists():
        raise UsageError(f"{path}: {unreachable(path)}")
    if not path.is_file():
        raise UsageError(f"{path}: not a regular file")
    return path


@contextmanager
def _progress(path: Path, label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback drawing a bar on stderr, for logs big enough to take a moment."""
    if path.stat().st_size < PROGRESS_THRESHOLD or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


# ---------------------------------------------------------------------------------------------
# Reading a log as the server would, one record at a time.


@contextmanager
def _records(path: Path, label: str) -> Iterator[LogRecords]:
    """The log's checked records, streamed: memory does not grow with the file."""
    with _progress(path, label) as progress, open(path, "rb") as file:
        yield LogRecords(LogLines(path, file, log_compression(path), progress))


# ---------------------------------------------------------------------------------------------
# stats


def run_stats(path: Path, out: TextIO) -> int:
    log_path = resolve_log_path(path)
    zstd = " (zstd)" if log_compression(log_path) == "zstd" else ""
    with _records(log_path, "reading") as reader:
        return _stats(
            str(log_path), reader, lambda: (f"on disk{zstd}", log_path.stat().st_size), out
        )


def _stats(
    name: str, reader: LogRecords, stored: Callable[[], tuple[str, int]], out: TextIO
) -> int:
    """`stats` of the records `reader` gives; `stored()`, once they are read, is how many
    bytes hold them and what that figure is called."""
    by_type: Counter[str] = Counter()
    rows = members = records = 0
    encode = msgspec.json.encode
    run: list[StorageRecord] = []
    """The chunk records since the last plain event: packed together, as a packer would."""
    packed_body = unpacked_body = 0
    header = reader.header
    for record in reader:
        records += 1
        if type(record) in ROW_CLASSES or type(record) is AssistantChunk:
            run.append(record)
            if type(record) in ROW_CLASSES:
                rows += 1
                count = record_count(record)
                members += count
                by_type["assistant/chunk"] += count
            else:
                by_type["assistant/chunk"] += 1
            unpacked_body += sum(len(encode(e)) + 1 for e in decode_storage_record(record))
            continue
        if run:
            packed_body += len(encode_records(pack_chunk_runs(run)))
            run = []
        by_type[event_type(cast(SessionEvent, record))] += 1  # rows were taken above
        size = len(encode(record)) + 1
        packed_body += size
        unpacked_body += size
    if run:
        packed_body += len(encode_records(pack_chunk_runs(run)))
    event_count, torn_tail = reader.event_count, reader.torn_tail
    label, on_disk = stored()
    header_size = len(encode_records([header]))
    unpacked = header_size + unpacked_body
    packed = header_size + packed_body
    w = out.write
    w(f"log          {name}\n")
    w(f"session      {header.id}\n")
    w(f"cwd          {header.cwd}\n")
    if isinstance(header.origin, str):
        w(f"origin       {header.origin} of {header.parent_session}\n")
    w(f"events       {event_count:,}\n")
    w(f"records      {records:,} lines after the header\n")
    w(f"chunk rows   {rows:,} holding {members:,} chunks\n")
    if torn_tail:
        w("torn tail    yes: an incomplete final line is ignored\n")
    w("\nevents by type\n")
    for name, count in sorted(by_type.items(), key=lambda item: (-item[1], item[0])):
        w(f"  {name:<20} {count:>12,}\n")
    w("\nbytes\n")
    w(f"  {label:<20} {on_disk:>12,}\n")
    w(f"  packed JSON          {packed:>12,}\n")
    w(f"  unpacked JSON        {unpacked:>12,}\n")
    if unpacked:
        w(f"  packed / unpacked    {packed / unpacked:>12.1%}\n")
    return 0


# ---------------------------------------------------------------------------------------------
# cat

CAT_BUFFER: Final = 1024 * 1024
"""Bytes of output `cat` gathers before writing them."""


def run_cat(path: Path, out: TextIO) -> int:
    """Every logical event as one JSON line (rows expanded), header first, written as the log
    is read (a corrupt line stops it there, with the line named on stderr)."""
    log_path = resolve_log_path(path)
    with _records(log_path, "reading") as reader:
        return _cat(reader, out)


def _cat(reader: LogRecords, out: TextIO) -> int:
    stream = out.buffer if hasattr(out, "buffer") else None
    out.flush()

    def write(data: bytes) -> None:
        if stream is not None:
            stream.write(data)
            stream.flush()
        else:
            out.write(data.decode())

    pending = [msgspec.json.encode(reader.header), b"\n"]
    size = 0
    for record in reader:
        for event in decode_storage_record(record):
            line = encode_event(event)
            pending += (line, b"\n")
            size += len(line) + 1
        if size >= CAT_BUFFER:
            write(b"".join(pending))
            pending, size = [], 0
    write(b"".join(pending))
    return 0


# ---------------------------------------------------------------------------------------------
# verify


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    events: int = 0
    lines: int = 0
    unreadable_from: int | None = None
    """The line from which on a damaged Zstandard frame hides the rest (`lines` is then 0)."""


def verify_bytes(path: Path | str, data: bytes, compression: str) -> Report:
    """Every check of SPEC 2.1 to 2.5 over a log's bytes, reporting every problem found."""
    return verify_lines(LogLines(path, io.BytesIO(data), cast(Compression, compression)))


def verify_lines(source: Lines) -> Report:
    """Every check of SPEC 2.1 to 2.5 over a log's lines, read one at a time."""
    report = Report()
    lines = iter(source)
    try:
        _verify(source.path, lines, report)
    except CorruptLog as exc:
        # A line or frame that cannot be read ends what can be checked: report what was read.
        report.problems.append(Problem(exc.line, exc.reason))
        report.lines = source.count
        report.unreadable_from = exc.line
        return report
    report.lines = source.count
    if source.torn_tail:
        report.notes.insert(
            0,
            f"line {source.count + 1} is incomplete (a torn write): readers ignore it and the "
            "next load truncates it",
        )
    return report


def _verify(path: Path | str, lines: Iterator[Line], report: Report) -> None:
    first = next(lines, None)
    if first is None:
        report.problems.append(Problem(1, "the log has no complete header line"))
        return
    try:
        parse_header(path, first)
    except UnsupportedVersion as exc:
        report.problems.append(Problem(1, str(exc).split(": ", 1)[1]))
        return  # another format: nothing after the header can be judged
    except CorruptLog as exc:
        report.problems.append(Problem(1, exc.reason))

    check = RecordChecker(path, collect=True)
    check.problems = report.problems
    open_turn: int | None = None
    for number, raw in enumerate(lines, start=2):
        record = check.line(number, raw)
        if record is None:
            continue
        if type(record) is UnknownEvent:
            report.notes.append(f"line {number}: unknown event type {record.type!r}, ignorable")
        elif type(record) is TurnStart:
            if open_turn is not None:
                report.problems.append(
                    Problem(number, f"turn/start while turn {open_turn} has no turn/end")
                )
            open_turn = record.data.turn
        elif type(record) is TurnEnd:
            open_turn = None
        report.events = cast(int, check.expected)
    if open_turn is not None:
        report.notes.append(
            f"turn {open_turn} has no turn/end (the process died): the next load closes it as interrupted"
        )


def run_verify(path: Path, out: TextIO) -> int:
    log_path = resolve_log_path(path)
    with open(log_path, "rb") as file:
        report = verify_lines(LogLines(log_path, file, log_compression(log_path)))
    return write_report(str(log_path), report, out)


def write_report(name: str, report: Report, out: TextIO) -> int:
    """`verify`'s report, and its exit status."""
    for problem in report.problems:
        out.write(f"{name}:{problem.line}: {problem.message}\n")
    for note in report.notes:
        out.write(f"note: {note}\n")
    if report.problems:
        count = len(report.problems)
        where = (
            f"; the log cannot be read from line {report.unreadable_from} on"
            if report.unreadable_from is not None
            else f" in {report.lines:,} lines"
        )
        out.write(f"FAILED: {count} problem{'s' if count != 1 else ''}{where}\n")
        return 1
    out.write(f"OK: {report.events:,} events in {report.lines:,} lines\n")
    return 0


COMMANDS: Final = {"stats": run_stats, "verify": run_verify, "cat": run_cat}


def run_log_command(action: str, path: Path, out: TextIO = sys.stdout) -> int:
    """Run one `log` action; a log that cannot be read is one line on stderr, status 2 when
    it could not be read at all, 1 when what was read is wrong (`outcome`)."""
    try:
        return COMMANDS[action](path, out)
    except UsageError as exc:
        sys.stderr.write(f"acp-server log {action}: error: {exc}\n")
        return CANNOT_RUN
    except BrokenPipeError:
        raise  # the reader went away: the command line ends quietly
    except (LogError, OSError) as exc:
        sys.stderr.write(f"acp-server log {action}: error: {exc}\n")
        return failure_status(exc)


def run_log(action: str, path: Path, store: str | None, out: TextIO = sys.stdout) -> int:
    """`log ACTION PATH [--store URL]`: PATH is a log or a session directory; with `--store`,
    or when no such path exists and PATH is a session id, the session of that id in the
    store (by default the one `serve` would use)."""
    if store is None and (os.path.lexists(path) or not _is_session_id(str(path))):
        return run_log_command(action, path, out)
    return run_stored_log_command(action, store, str(path), out)


def _is_session_id(text: str) -> bool:
    from ..core.ids import InvalidSessionId, validate_session_id

    try:
        validate_session_id(text)
    except InvalidSessionId:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# --store URL SESSION_ID


def run_stored_log_command(
    action: str, url_text: str | None, session_id: str, out: TextIO = sys.stdout
) -> int:
    """`log ACTION --store URL SESSION_ID`: the same action over a session of any store
    (`url_text` None: the store `serve` would use)."""
    from ..core.ids import InvalidSessionId, validate_session_id
    from .store_choice import StoreChoiceError, chosen_store, describe

    try:
        choice, url = chosen_store(url_text, None)
        named = url.shown if url_text is not None else describe(choice, url)
        if url.kind.missing(url.path):
            raise UsageError(f"{url.shown}: no such database")
        validate_session_id(session_id)
        log_file = url.log_file(session_id)
        if log_file is not None and not os.path.lexists(log_file):
            raise UsageError(f"no session {session_id} in {named}")
    except (StoreChoiceError, InvalidSessionId, UsageError) as exc:
        sys.stderr.write(f"acp-server log {action}: error: {exc}\n")
        return CANNOT_RUN
    if log_file is not None:
        return run_log_command(action, log_file, out)
    try:
        return _run_lines(action, _stored_lines(url, session_id), out)
    except BrokenPipeError:
        raise
    except (LogError, OSError) as exc:
        sys.stderr.write(f"acp-server log {action}: error: {exc}\n")
        return failure_status(exc)


def _stored_lines(url: StoreUrl, session_id: str) -> SessionLines:
    """The session's lines, read through its store (closed once they are in hand)."""
    import anyio

    from ..storage.url import open_store

    async def read() -> SessionLines:
        store = open_store(url)
        try:
            return await store.lines(session_id)
        finally:
            await store.aclose()

    return anyio.run(read)


def _run_lines(action: str, lines: SessionLines, out: TextIO) -> int:
    if action == "verify":
        return write_report(lines.path, verify_lines(lines), out)
    reader = LogRecords(lines)
    if action == "cat":
        return _cat(reader, out)
    return _stats(lines.path, reader, lambda: ("in the database", lines.size), out)
