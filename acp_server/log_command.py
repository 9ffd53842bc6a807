"""`acp-server log stats|verify|cat PATH`: inspect a session log without reading our code.

PATH is a session directory, a `session.jsonl` or a `session.jsonl.zst`. `verify` keeps going
after a problem so that one run reports every problem with its line number (exit status 1),
where loading a log stops at the first. `stats` and `cat` read the log as the server would
(a torn final line ignored) and fail on the first problem, with its line.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO, cast

import msgspec

from .core.chunk_rows import (
    ROW_CLASSES,
    ChunkRow,
    ChunkRowError,
    decode_record_json,
    pack_chunk_runs,
    validate_row,
)
from .core.events import (
    AssistantMessageEvent,
    EventError,
    SessionEvent,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UnknownEvent,
    encode_event,
    event_type,
)
from .core.paging import record_count, record_start
from .storage.log import (
    PLAIN_LOG_NAME,
    ZSTD_LOG_NAME,
    CorruptLog,
    LogError,
    UnsupportedVersion,
    encode_records,
    log_compression,
    parse_header,
    plain_lines,
    read_log,
    zstd_lines,
)

PROGRESS_THRESHOLD: Final = 16 * 1024 * 1024
"""Logs larger than this (bytes on disk) get a progress bar on stderr."""


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
        raise UsageError(f"{path}: no such file or directory")
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
# stats


def run_stats(path: Path, out: TextIO) -> int:
    log_path = resolve_log_path(path)
    with _progress(log_path, "reading") as progress:
        contents = read_log(log_path, progress)
    by_type: Counter[str] = Counter()
    rows = members = 0
    for record in contents.records:
        if type(record) in ROW_CLASSES:
            rows += 1
            count = record_count(record)
            members += count
            by_type["assistant/chunk"] += count
        else:
            by_type[event_type(cast(SessionEvent, record))] += 1
    on_disk = log_path.stat().st_size
    events = contents.events
    unpacked = len(encode_records([contents.header, *events]))
    packed = len(encode_records([contents.header, *pack_chunk_runs(events)]))
    header = contents.header
    w = out.write
    w(f"log          {log_path}\n")
    w(f"session      {header.id}\n")
    w(f"cwd          {header.cwd}\n")
    if isinstance(header.origin, str):
        w(f"origin       {header.origin} of {header.parent_session}\n")
    w(f"events       {contents.event_count:,}\n")
    w(f"records      {len(contents.records):,} lines after the header\n")
    w(f"chunk rows   {rows:,} holding {members:,} chunks\n")
    if contents.torn_tail:
        w("torn tail    yes: an incomplete final line is ignored\n")
    w("\nevents by type\n")
    for name, count in sorted(by_type.items(), key=lambda item: (-item[1], item[0])):
        w(f"  {name:<20} {count:>12,}\n")
    w("\nbytes\n")
    w(f"  on disk{' (zstd)' if log_compression(log_path) == 'zstd' else '':<13} {on_disk:>12,}\n")
    w(f"  packed JSON          {packed:>12,}\n")
    w(f"  unpacked JSON        {unpacked:>12,}\n")
    if unpacked:
        w(f"  packed / unpacked    {packed / unpacked:>12.1%}\n")
    return 0


# ---------------------------------------------------------------------------------------------
# cat


def run_cat(path: Path, out: TextIO) -> int:
    """Every logical event as one JSON line (rows expanded), header first."""
    log_path = resolve_log_path(path)
    with _progress(log_path, "reading") as progress:
        contents = read_log(log_path, progress)
    stream = out.buffer if hasattr(out, "buffer") else None
    lines = [msgspec.json.encode(contents.header)]
    lines.extend(encode_event(event) for event in contents.events)
    data = b"\n".join(lines) + b"\n"
    if stream is not None:
        out.flush()
        stream.write(data)
        stream.flush()
    else:
        out.write(data.decode())
    return 0


# ---------------------------------------------------------------------------------------------
# verify


@dataclass
class Problem:
    line: int
    message: str


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    events: int = 0
    lines: int = 0


def verify_bytes(path: Path | str, data: bytes, compression: str) -> Report:
    """Every check of SPEC 2.1 to 2.5 over a log's bytes, reporting every problem found."""
    report = Report()
    try:
        if compression == "zstd":
            lines, valid = zstd_lines(path, data)
        else:
            lines, valid = plain_lines(data)
    except CorruptLog as exc:
        # A Zstandard frame that cannot be read ends what can be checked: report what was read.
        report.problems.append(Problem(exc.line, exc.reason))
        return report
    report.lines = len(lines)
    if valid != len(data):
        report.notes.append(
            f"line {len(lines) + 1} is incomplete (a torn write): readers ignore it and the next "
            "load truncates it"
        )
    if not lines:
        report.problems.append(Problem(1, "the log has no complete header line"))
        return report
    try:
        parse_header(path, lines[0])
    except UnsupportedVersion as exc:
        report.problems.append(Problem(1, str(exc).split(": ", 1)[1]))
        return report  # another format: nothing after the header can be judged
    except CorruptLog as exc:
        report.problems.append(Problem(1, exc.reason))

    expected: int | None = 0
    """The seq the next record must start at; None after an unreadable line (resynchronize)."""
    calls: dict[int, str] = {}
    open_turn: int | None = None
    for number, raw in enumerate(lines[1:], start=2):
        try:
            record = decode_record_json(raw)
            if type(record) in ROW_CLASSES:
                validate_row(cast(ChunkRow, record))
        except (ChunkRowError, EventError) as exc:
            report.problems.append(Problem(number, str(exc)))
            expected = None  # its events are unknown: the next record sets the count again
            continue
        start = record_start(record)
        if expected is not None and start != expected:
            what = "gap" if start > expected else "overlap"
            report.problems.append(
                Problem(number, f"seq {what}: expected seq {expected}, found {start}")
            )
        expected = start + record_count(record)
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
        elif type(record) is ToolCall:
            calls[start] = record.data.call_id
        for problem in _source_range_problems(record, start, calls):
            report.problems.append(Problem(number, problem))
    report.events = expected or 0
    if open_turn is not None:
        report.notes.append(
            f"turn {open_turn} has no turn/end (the process died): the next load closes it as interrupted"
        )
    return report


def _source_range_problems(record: object, seq: int, calls: dict[int, str]) -> list[str]:
    source = getattr(record, "source_range", None)
    if not isinstance(source, tuple):
        return []
    first, last = source
    if not first <= last < seq:
        return [f"sourceRange [{first}, {last}] must name earlier seqs in order"]
    if type(record) is ToolResult:
        call_id = calls.get(first)
        if first != last or call_id is None:
            return [
                f"sourceRange [{first}, {last}] of a tool/result must be [s, s] with s a tool/call"
            ]
        if call_id != record.data.call_id:
            return [
                f"tool/result for {record.data.call_id!r} points at the tool/call of {call_id!r}"
            ]
    elif type(record) is AssistantMessageEvent and last != seq - 1:
        return [f"sourceRange [{first}, {last}] of an assistant/message must end just before it"]
    return []


def run_verify(path: Path, out: TextIO) -> int:
    log_path = resolve_log_path(path)
    report = verify_bytes(log_path, log_path.read_bytes(), log_compression(log_path))
    for problem in report.problems:
        out.write(f"{log_path}:{problem.line}: {problem.message}\n")
    for note in report.notes:
        out.write(f"note: {note}\n")
    if report.problems:
        count = len(report.problems)
        out.write(f"FAILED: {count} problem{'s' if count != 1 else ''} in {report.lines:,} lines\n")
        return 1
    out.write(f"OK: {report.events:,} events in {report.lines:,} lines\n")
    return 0


COMMANDS: Final = {"stats": run_stats, "verify": run_verify, "cat": run_cat}


def run_log_command(action: str, path: Path, out: TextIO = sys.stdout) -> int:
    """Run one `log` action; a log that cannot be read is one line on stderr and status 1."""
    try:
        return COMMANDS[action](path, out)
    except UsageError as exc:
        sys.stderr.write(f"acp-server log {action}: error: {exc}\n")
        return 2
    except (LogError, OSError) as exc:
        sys.stderr.write(f"acp-server log {action}: error: {exc}\n")
        return 1
