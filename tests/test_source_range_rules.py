"""`sourceRange` (SPEC 1.1) is checked alike by every reader: `log verify`, the loader
(`read_log`, `session/load`) and the history API (`session.page`, `session.follow`).

An `assistant/message` names its step's chunks, ending just before it; a `tool/result` names
`[s, s]`, s its `tool/call`. A range pointing forward, at the event itself or elsewhere would
make a page cut at the wrong seq (`[0, 0]` on the last message made `maxMessages: 1` return
the whole log), so each reader refuses the log, naming the same line and the same reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, write_fixture

from acp_server.cli.log import verify_bytes
from acp_server.core.header import SESSION_FORMAT_VERSION
from acp_server.storage.errors import CorruptLog
from acp_server.storage.jsonl.log import read_log

WORK = "/work"
HEADER = {"type": "session", "version": SESSION_FORMAT_VERSION, "createdAt": 0, "cwd": WORK}


def event(seq: int, type_: str, data: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    return {"type": type_, "seq": seq, "time": 0, "data": data, **envelope}


def chunk(seq: int, value: dict[str, Any]) -> dict[str, Any]:
    return event(seq, "assistant/chunk", {"turn": 0, "step": 0, "chunk": value})


def answered(source_range: list[int]) -> list[dict[str, Any]]:
    """A turn whose one step streams "hi"; its `assistant/message` (seq 6, line 8) carries
    `source_range` (the right one is [3, 5])."""
    text = [{"type": "text", "text": "hi"}]
    return [
        event(0, "turn/start", {"turn": 0}),
        event(1, "user/message", {"turn": 0, "message": {"id": "u0", "content": text}}),
        event(2, "step/start", {"turn": 0, "step": 0}),
        chunk(3, {"type": "block-start", "index": 0, "blockType": "text"}),
        chunk(4, {"type": "text-delta", "index": 0, "text": "hi"}),
        chunk(5, {"type": "block-end", "index": 0}),
        event(
            6,
            "assistant/message",
            {"turn": 0, "step": 0, "message": {"id": "m0", "content": text}},
            sourceRange=source_range,
        ),
        event(7, "step/end", {"turn": 0, "step": 0}),
        event(8, "turn/end", {"turn": 0, "reason": {"kind": "completed"}}),
    ]


def tool_answered(source_range: list[int]) -> list[dict[str, Any]]:
    """A step that calls a tool (seq 3) and logs its result (seq 4, line 6) with `source_range`
    (the right one is [3, 3])."""
    return [
        event(0, "turn/start", {"turn": 0}),
        event(1, "user/message", {"turn": 0, "message": {"id": "u0", "content": []}}),
        event(2, "step/start", {"turn": 0, "step": 0}),
        event(
            3,
            "tool/call",
            {"turn": 0, "step": 0, "callId": "c1", "name": "read_file", "arguments": "{}"},
        ),
        event(
            4,
            "tool/result",
            {"turn": 0, "step": 0, "callId": "c1", "content": []},
            sourceRange=source_range,
        ),
    ]


def log_bytes(session_id: str, body: list[dict[str, Any]]) -> bytes:
    lines = [{**HEADER, "id": session_id}, *body]
    return b"".join(json.dumps(value).encode() + b"\n" for value in lines)


def write_log(root: Path, session_id: str, body: list[dict[str, Any]]) -> Path:
    path = root / session_id / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(log_bytes(session_id, body))
    return path


ORDER = "must name earlier seqs in order"
MESSAGE_END = "of an assistant/message must end just before it"
RESULT_SHAPE = "of a tool/result must be [s, s] with s a tool/call"

BAD_RANGES = [
    pytest.param(answered([0, 0]), 8, f"sourceRange [0, 0] {MESSAGE_END}", id="message-at-seq-0"),
    pytest.param(answered([3, 4]), 8, f"sourceRange [3, 4] {MESSAGE_END}", id="message-short"),
    pytest.param(answered([6, 6]), 8, f"sourceRange [6, 6] {ORDER}", id="message-itself"),
    pytest.param(answered([7, 8]), 8, f"sourceRange [7, 8] {ORDER}", id="message-forward"),
    pytest.param(answered([5, 3]), 8, f"sourceRange [5, 3] {ORDER}", id="message-reversed"),
    pytest.param(tool_answered([4, 4]), 6, f"sourceRange [4, 4] {ORDER}", id="result-itself"),
    pytest.param(tool_answered([3, 4]), 6, f"sourceRange [3, 4] {ORDER}", id="result-forward"),
    pytest.param(tool_answered([2, 3]), 6, f"sourceRange [2, 3] {RESULT_SHAPE}", id="result-wide"),
    pytest.param(tool_answered([2, 2]), 6, f"sourceRange [2, 2] {RESULT_SHAPE}", id="not-a-call"),
]


@pytest.mark.parametrize(("body", "line", "reason"), BAD_RANGES)
def test_the_loader_refuses_a_bad_source_range_where_verify_reports_it(
    tmp_path: Path, body: list[dict[str, Any]], line: int, reason: str
) -> None:
    path = write_log(tmp_path, "s", body)
    report = verify_bytes(path, path.read_bytes(), "none")
    with pytest.raises(CorruptLog) as refused:
        read_log(path)
    assert [(p.line, p.message) for p in report.problems] == [(line, reason)]
    assert (refused.value.line, refused.value.reason) == (line, reason)


# ---------------------------------------------------------------------------------------------
# Through the real server.


@pytest.fixture
def server(tmp_path: Path) -> Iterator[AcpProcess]:
    fixture = write_fixture(tmp_path / "fixture", Scenario([]))
    with AcpProcess(tmp_path / "sessions", "--replay", str(fixture)) as process:
        process.initialize()
        yield process


def corrupt(line: int, detail: str) -> dict[str, Any]:
    return {
        "code": -32010,
        "message": f"Session log unreadable: line {line}: {detail}",
        "data": {"reason": "corrupt", "line": line, "detail": detail},
    }


READERS = [
    ("session/load", {"sessionId": "s", "cwd": WORK, "mcpServers": []}),
    ("session.page", {"address": {"kind": "session", "sessionId": "s"}, "throughSeq": 8}),
    (
        "session.page",
        {"address": {"kind": "session", "sessionId": "s"}, "throughSeq": 8, "maxMessages": 1},
    ),
    ("session.follow", {"address": {"kind": "session", "sessionId": "s"}, "maxMessages": 1}),
]


@pytest.mark.process
@pytest.mark.parametrize(("method", "params"), READERS)
@pytest.mark.parametrize("source_range", [[0, 0], [7, 8]], ids=["at-seq-0", "forward"])
def test_a_message_with_a_bad_source_range_is_a_corrupt_log_for_every_method(
    tmp_path: Path,
    server: AcpProcess,
    method: str,
    params: dict[str, Any],
    source_range: list[int],
) -> None:
    path = write_log(tmp_path / "sessions", "s", answered(source_range))
    before = path.read_bytes()
    first, last = source_range
    rule = MESSAGE_END if last < 6 else ORDER
    assert server.error(method, params) == corrupt(8, f"sourceRange [{first}, {last}] {rule}")
    assert path.read_bytes() == before
