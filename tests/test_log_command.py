"""`acp-server log stats|verify|cat PATH` on good and broken logs (SPEC 8)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.cli.log import verify_bytes
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    StepData,
    StepStart,
    TurnStart,
    TurnStartData,
    encode_event,
)
from acp_server.core.header import SessionHeader
from acp_server.core.stream import TextDelta
from acp_server.storage.jsonl.lines import Compression
from acp_server.storage.jsonl.sessions import SessionStore

EVENTS = [
    TurnStart(0, 10, TurnStartData(0)),
    StepStart(1, 10, StepData(0, 0)),
    *[
        AssistantChunk(2 + i, 11 + i, AssistantChunkData(0, 0, TextDelta(0, t)))
        for i, t in enumerate(["He", "llo", ",", " world"])
    ],
]


def write_session(root: Path, compression: Compression = "none") -> Path:
    store = SessionStore(root, compression=compression)
    writer = store.create(SessionHeader(version=2, id="s1", created_at=5, cwd="/work"))
    writer.append(EVENTS)
    writer.close()
    return root / "s1"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", "log", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.process
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_cat_prints_the_header_then_every_event_expanded(tmp_path: Path, compression: str) -> None:
    session = write_session(tmp_path, compression)
    result = run("cat", str(session))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert json.loads(lines[0]) == {
        "type": "session",
        "version": 2,
        "id": "s1",
        "createdAt": 5,
        "cwd": "/work",
    }
    assert lines[1:] == [encode_event(e).decode() for e in EVENTS]


@pytest.mark.process
def test_cat_accepts_the_log_file_itself(tmp_path: Path) -> None:
    session = write_session(tmp_path)
    assert run("cat", str(session / "session.jsonl")).stdout == run("cat", str(session)).stdout


@pytest.mark.process
def test_stats_counts_events_by_type_rows_and_bytes(tmp_path: Path) -> None:
    session = write_session(tmp_path)
    result = run("stats", str(session))
    assert result.returncode == 0, result.stderr
    assert "events       6\n" in result.stdout
    assert "chunk rows   1 holding 4 chunks\n" in result.stdout
    assert "  assistant/chunk                 4\n" in result.stdout
    assert "  turn/start                      1\n" in result.stdout
    assert all(
        len(line) <= 80 for line in result.stdout.splitlines() if not line.startswith("log ")
    )


@pytest.mark.process
def test_verify_passes_a_good_log(tmp_path: Path) -> None:
    session = write_session(tmp_path)
    result = run("verify", str(session))
    assert (result.returncode, result.stdout) == (
        0,
        "note: turn 0 has no turn/end (the process died): the next load closes it as interrupted\n"
        "OK: 6 events in 4 lines\n",
    )


@pytest.mark.process
def test_verify_reports_every_problem_with_its_line_and_exits_1(tmp_path: Path) -> None:
    session = write_session(tmp_path)
    log = session / "session.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"seq":0', b'"seq":1')  # line 2: gap
    lines[2] = b"{oops"  # line 3: not JSON
    log.write_bytes(b"\n".join(lines))
    result = run("verify", str(session))
    assert result.returncode == 1
    assert result.stdout.splitlines()[:2] == [
        f"{log}:2: seq gap: expected seq 0, found 1",
        f"{log}:3: invalid JSON: JSON is malformed: object keys must be strings (byte 1)",
    ]
    assert result.stdout.splitlines()[-1] == "FAILED: 2 problems in 4 lines"


def test_verify_reports_an_unsupported_version_on_line_1(tmp_path: Path) -> None:
    data = b'{"type":"session","version":999}\n'
    report = verify_bytes("x.jsonl", data, "none")
    assert [(p.line, p.message) for p in report.problems] == [
        (1, "unsupported session format version 999 (this build reads version 2)")
    ]


@pytest.mark.process
def test_verify_notes_a_torn_tail_without_failing(tmp_path: Path) -> None:
    session = write_session(tmp_path)
    with open(session / "session.jsonl", "ab") as file:
        file.write(b'{"type":"turn/e')
    result = run("verify", str(session))
    assert result.returncode == 0
    assert "note: line 5 is incomplete (a torn write)" in result.stdout


def test_verify_checks_tool_result_source_ranges() -> None:
    header = b'{"type":"session","version":2,"id":"s","createdAt":0,"cwd":"/"}\n'
    call = b'{"type":"tool/call","seq":0,"time":0,"data":{"turn":0,"step":0,"callId":"a","name":"x","arguments":"{}"}}\n'
    result = b'{"type":"tool/result","seq":1,"time":0,"data":{"turn":0,"step":0,"callId":"b","content":[]},"sourceRange":[0,0]}\n'
    report = verify_bytes("x.jsonl", header + call + result, "none")
    assert [(p.line, p.message) for p in report.problems] == [
        (3, "tool/result for 'b' points at the tool/call of 'a'")
    ]


@pytest.mark.process
@pytest.mark.parametrize("action", ["stats", "verify", "cat"])
def test_a_path_that_is_not_a_log_is_one_line_and_status_2(tmp_path: Path, action: str) -> None:
    result = run(action, str(tmp_path / "missing"))
    assert result.returncode == 2
    assert (
        result.stderr
        == f"acp-server log {action}: error: {tmp_path / 'missing'}: no such file or directory\n"
    )
    assert result.stdout == ""


@pytest.mark.process
def test_a_symlink_loop_is_named_as_one_not_as_a_missing_file(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = run("verify", str(loop))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"acp-server log verify: error: {loop}: a symlink loop (too many levels of symbolic links)\n"
    )


@pytest.mark.process
def test_stats_of_a_corrupt_log_names_the_line_and_exits_1(tmp_path: Path) -> None:
    session = write_session(tmp_path)
    log = session / "session.jsonl"
    log.write_bytes(log.read_bytes().replace(b'"seq":1', b'"seq":9'))
    result = run("stats", str(session))
    assert result.returncode == 1
    assert (
        result.stderr
        == f"acp-server log stats: error: {log}: line 3: seq gap: expected seq 1, found 9\n"
    )


@pytest.mark.process
def test_verify_of_a_damaged_zstd_frame_says_from_which_line_the_log_cannot_be_read(
    tmp_path: Path,
) -> None:
    session = write_session(tmp_path, "zstd")
    log = session / "session.jsonl.zst"
    data = bytearray(log.read_bytes())
    data[-5] ^= 0xFF  # inside the frame after the header's
    log.write_bytes(bytes(data))
    result = run("verify", str(session))
    assert result.returncode == 1
    assert (
        result.stdout.splitlines()[-1] == "FAILED: 1 problem; the log cannot be read from line 2 on"
    )
