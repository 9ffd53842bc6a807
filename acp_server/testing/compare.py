"""Compare a snapshot run with a scenario's committed files, or refresh them.

`compare` says how a `RunResult` differs from the committed transcript and logs, with diffs a
reader can act on (logs one logical event a line, seq and time left out); `refresh` rewrites the
committed files whose bytes change.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from ..core.replay_script import ReplayError, parse_fixture
from .process import encode_line
from .runner import TRANSCRIPT_NAME, RunResult


@dataclass
class Mismatch:
    name: str
    """The committed file that differs."""
    diff: str


DIFF_LINES: Final = 80


def _diff(expected: list[str], actual: list[str], name: str) -> str:
    lines = list(
        difflib.unified_diff(
            expected, actual, f"{name} (committed)", f"{name} (this run)", n=2, lineterm=""
        )
    )
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... ({len(lines) - DIFF_LINES} more diff lines)"]
    return "\n".join(lines)


def event_lines(name: str, data: bytes) -> list[str]:
    """A fixture as one line per logical event, without seq or time: rows expanded, so a diff
    points at the very chunk that differs, and an extra event shifts no other line."""
    try:
        fixture = parse_fixture(name, data.splitlines())
    except ReplayError as exc:
        return [f"(not a fixture: {exc})"]
    lines = [encode_line(msgspec.to_builtins(fixture.header))]
    for event in fixture.events:
        value = msgspec.to_builtins(event)
        value.pop("seq", None)
        value.pop("time", None)
        lines.append(encode_line(value))
    return lines


def compare(directory: Path | str, result: RunResult) -> list[Mismatch]:
    """How `result` differs from the files committed in `directory` (nothing: an empty list)."""
    directory = Path(directory)
    mismatches = []
    transcript = directory / TRANSCRIPT_NAME
    if not transcript.is_file():
        mismatches.append(
            Mismatch(TRANSCRIPT_NAME, "missing: run with ACP_SNAPSHOT=refresh to write it")
        )
    elif transcript.read_bytes() != result.transcript:
        expected = transcript.read_text(encoding="utf-8").splitlines()
        actual = result.transcript.decode().splitlines()
        mismatches.append(Mismatch(TRANSCRIPT_NAME, _diff(expected, actual, TRANSCRIPT_NAME)))
    for name, data in result.logs.items():
        path = directory / name
        if not path.is_file():
            mismatches.append(
                Mismatch(name, "missing: the run produced this log but nothing is committed")
            )
        elif path.read_bytes() != data:
            diff = _diff(event_lines(name, path.read_bytes()), event_lines(name, data), name)
            if not diff:  # same events, other bytes: a layout difference
                diff = _diff(
                    path.read_text(encoding="utf-8").splitlines(), data.decode().splitlines(), name
                )
            mismatches.append(
                Mismatch(name, "(one logical event a line, seq and time left out)\n" + diff)
            )
    for path in sorted(directory.glob("session.*.jsonl")):
        if path.name not in result.logs:
            mismatches.append(
                Mismatch(path.name, "committed, but the run started no such subagent")
            )
    return mismatches


def describe(mismatches: list[Mismatch]) -> str:
    return "\n\n".join(f"--- {m.name} differs ---\n{m.diff}" for m in mismatches)


def refresh(directory: Path | str, result: RunResult) -> list[str]:
    """Write the run's transcript and logs into `directory`; only files whose bytes change are
    written. Returns their names."""
    directory = Path(directory)
    written = []
    for name, data in [(TRANSCRIPT_NAME, result.transcript), *result.logs.items()]:
        path = directory / name
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
            written.append(name)
    return written


__all__ = ["Mismatch", "compare", "describe", "event_lines", "refresh"]
