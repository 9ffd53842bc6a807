"""Reading a log costs memory bounded by its lines, not by its size.

A header line (line 1) longer than `MAX_HEADER_LINE` is a corrupt log, refused without reading
the rest; a torn tail of any length is skipped without being held; `session/list` finds a
log's last line and last title searching backwards a block at a time; the `log` tools stream.
The big files here are sparse (`truncate`), so they cost no disk and little time; memory is
measured as the server's peak resident set (`VmHWM`) or, in-process, with `tracemalloc`.
"""

from __future__ import annotations

import io
import json
import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from acp_process import AcpProcess
from fixtures_builder import Scenario, write_fixture
from surface_values import session_setup

from acp_server.cli.log import run_log_command
from acp_server.core.header import SESSION_FORMAT_VERSION

BIG = 256 * 1024 * 1024
"""The size of the big logs: far above what any reader here may hold."""
SERVER_PEAK = 128 * 1024 * 1024
"""The most a server's resident set may reach while it reads a big log (it idles near 60 MiB)."""
TOOL_PEAK = 16 * 1024 * 1024
"""The most the `log` tools may allocate (traced) while they read a big log."""
WORK = "/work"
HEADER_TOO_LONG = "line 1 is longer than 1 MiB: not a session header"


def header_line(session_id: str) -> bytes:
    header = {
        "type": "session",
        "version": SESSION_FORMAT_VERSION,
        "id": session_id,
        "createdAt": 0,
        "cwd": WORK,
    }
    return json.dumps(header, separators=(",", ":")).encode() + b"\n"


def nul_log(root: Path, session_id: str, *, header: bool) -> Path:
    """A log of `BIG` bytes: NULs only, or a valid header then NULs (a torn tail)."""
    path = root / session_id / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(header_line(session_id) if header else b"")
    os.truncate(path, BIG)
    return path


def good_log(root: Path, session_id: str) -> None:
    path = root / session_id / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(header_line(session_id))


def peak_rss(process: AcpProcess) -> int:
    """The server's peak resident set so far, in bytes (Linux: `VmHWM`)."""
    status = Path(f"/proc/{process.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def server(tmp_path: Path, sessions: Path) -> Iterator[AcpProcess]:
    fixture = write_fixture(tmp_path / "fixture", Scenario([]))
    with AcpProcess(sessions, "--replay", str(fixture)) as process:
        process.initialize()
        yield process


def corrupt_header() -> dict[str, Any]:
    return {
        "code": -32010,
        "message": f"Session log unreadable: line 1: {HEADER_TOO_LONG}",
        "data": {"reason": "corrupt", "line": 1, "detail": HEADER_TOO_LONG},
    }


# ---------------------------------------------------------------------------------------------
# Through the server.


@pytest.mark.process
def test_session_list_skips_a_log_without_a_header_line_reading_a_bounded_part_of_it(
    sessions: Path, server: AcpProcess
) -> None:
    nul_log(sessions, "nuls", header=False)
    good_log(sessions, "good")
    listed = server.result("session/list", {})
    assert [info["sessionId"] for info in listed["sessions"]] == ["good"]
    assert peak_rss(server) < SERVER_PEAK


@pytest.mark.process
def test_session_list_shows_a_session_whose_log_ends_in_a_huge_torn_tail(
    sessions: Path, server: AcpProcess
) -> None:
    nul_log(sessions, "torn", header=True)
    listed = server.result("session/list", {})
    assert listed == {
        "sessions": [
            {
                "sessionId": "torn",
                "cwd": WORK,
                "updatedAt": "1970-01-01T00:00:00.000Z",
                "archived": False,
            }
        ]
    }
    assert peak_rss(server) < SERVER_PEAK


@pytest.mark.process
@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("session/load", {"sessionId": "nuls", "cwd": WORK, "mcpServers": []}),
        ("session/resume", {"sessionId": "nuls", "cwd": WORK}),
        ("session.page", {"address": {"kind": "session", "sessionId": "nuls"}, "throughSeq": 0}),
        ("session.follow", {"address": {"kind": "session", "sessionId": "nuls"}}),
    ],
)
def test_a_log_without_a_header_line_is_refused_as_corrupt_reading_a_bounded_part_of_it(
    sessions: Path, server: AcpProcess, method: str, params: dict[str, Any]
) -> None:
    nul_log(sessions, "nuls", header=False)
    assert server.error(method, params) == corrupt_header()
    assert peak_rss(server) < SERVER_PEAK


@pytest.mark.process
def test_loading_a_log_with_a_huge_torn_tail_truncates_it_without_holding_it(
    sessions: Path, server: AcpProcess
) -> None:
    path = nul_log(sessions, "torn", header=True)
    assert (
        server.result("session/load", {"sessionId": "torn", "cwd": WORK, "mcpServers": []})
        == session_setup()
    )
    assert path.read_bytes() == header_line("torn")
    assert peak_rss(server) < SERVER_PEAK


# ---------------------------------------------------------------------------------------------
# The log tools.


def traced_run(action: str, path: Path) -> tuple[int, str, int]:
    """`acp-server log ACTION PATH` in this process: its status, its output, and the peak of
    the memory it allocated."""
    out = io.StringIO()
    tracemalloc.start()
    try:
        status = run_log_command(action, path, out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return status, out.getvalue(), peak


@pytest.mark.parametrize("action", ["stats", "cat"])
def test_stats_and_cat_refuse_a_log_without_a_header_line_reading_a_bounded_part_of_it(
    tmp_path: Path, action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = nul_log(tmp_path, "nuls", header=False)
    status, output, peak = traced_run(action, path)
    assert (status, output) == (1, "")
    assert capsys.readouterr().err == (
        f"acp-server log {action}: error: {path}: line 1: {HEADER_TOO_LONG}\n"
    )
    assert peak < TOOL_PEAK


def test_verify_reports_a_header_line_too_long_reading_a_bounded_part_of_it(
    tmp_path: Path,
) -> None:
    path = nul_log(tmp_path, "nuls", header=False)
    status, output, peak = traced_run("verify", path)
    assert (status, output.splitlines()[0]) == (1, f"{path}:1: {HEADER_TOO_LONG}")
    assert peak < TOOL_PEAK


def test_verify_streams_a_log_with_a_huge_torn_tail(tmp_path: Path) -> None:
    path = nul_log(tmp_path, "torn", header=True)
    status, output, peak = traced_run("verify", path)
    assert (status, output) == (
        0,
        "note: line 2 is incomplete (a torn write): readers ignore it and the next load "
        "truncates it\nOK: 0 events in 1 lines\n",
    )
    assert peak < TOOL_PEAK


@pytest.mark.parametrize("action", ["stats", "cat"])
def test_stats_and_cat_stream_a_log_with_a_huge_torn_tail(tmp_path: Path, action: str) -> None:
    path = nul_log(tmp_path, "torn", header=True)
    status, output, peak = traced_run(action, path)
    assert status == 0
    if action == "cat":
        assert output.encode() == header_line("torn")
    else:
        assert "torn tail    yes: an incomplete final line is ignored\n" in output
    assert peak < TOOL_PEAK


# ---------------------------------------------------------------------------------------------
# A Zstandard log whose first frame is small on disk and huge once decompressed.


def zstd_bomb(root: Path, session_id: str) -> Path:
    """A `session.jsonl.zst` whose one frame holds `BIG` NULs (a few KiB compressed)."""
    path = root / session_id / "session.jsonl.zst"
    path.parent.mkdir(parents=True)
    compressor = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    with open(path, "wb") as file:
        block = bytes(1024 * 1024)
        for _ in range(BIG // len(block)):
            file.write(compressor.compress(block))
        file.write(compressor.flush())
    return path


@pytest.mark.process
def test_session_list_skips_a_zstd_log_whose_first_frame_decompresses_past_the_bound(
    sessions: Path, server: AcpProcess
) -> None:
    zstd_bomb(sessions, "bomb")
    good_log(sessions, "good")
    listed = server.result("session/list", {})
    assert [info["sessionId"] for info in listed["sessions"]] == ["good"]
    assert peak_rss(server) < SERVER_PEAK


@pytest.mark.process
def test_session_page_refuses_a_zstd_log_whose_first_frame_decompresses_past_the_bound(
    sessions: Path, server: AcpProcess
) -> None:
    zstd_bomb(sessions, "bomb")
    params = {"address": {"kind": "session", "sessionId": "bomb"}, "throughSeq": 0}
    assert server.error("session.page", params) == corrupt_header()
    assert peak_rss(server) < SERVER_PEAK


def test_verify_refuses_a_zstd_log_whose_first_frame_decompresses_past_the_bound(
    tmp_path: Path,
) -> None:
    path = zstd_bomb(tmp_path, "bomb")
    status, output, peak = traced_run("verify", path)
    assert (status, output.splitlines()[0]) == (1, f"{path}:1: {HEADER_TOO_LONG}")
    assert peak < TOOL_PEAK


def test_the_history_index_of_a_zstd_log_walks_its_frames_without_holding_the_file(
    tmp_path: Path,
) -> None:
    """A page of a Zstandard log reads its frames' headers a block at a time: the newest page
    of a 16 MiB log holds a few frames, not the file."""
    from acp_server.storage.jsonl.index import LogIndex

    compressor = zstandard.ZstdCompressor(write_checksum=True)
    path = tmp_path / "session.jsonl.zst"
    with open(path, "wb") as file:
        file.write(compressor.compress(header_line("big") + b"\n"))
        for seq in range(256):
            # Random hex digits compress only to half: each frame stays about 70 KiB on disk.
            event = {"type": "session/title", "seq": seq, "time": 0, "data": {"title": ""}}
            event["data"]["title"] = os.urandom(64 * 1024).hex()
            file.write(compressor.compress(json.dumps(event).encode() + b"\n"))
    assert path.stat().st_size > 16 * 1024 * 1024
    tracemalloc.start()
    try:
        index = LogIndex.build(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert index.last_seq == 255
    assert peak < 8 * 1024 * 1024
