"""A replayed tool output over 64 KiB (SPEC 4.2) through real processes: the live turn shows it
whole, a fresh process's `session/load` shows its first 64 KiB with `_meta["acp-server"].cut`,
and `session.page` at the cut's seq gives the whole output back.

Every frame the loading server writes is held to the official ACP models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp_models import AGENT_RESULTS, TO_CLIENT_PARAMS, exact
from acp_process import AcpProcess, assert_jsonrpc_frame
from fixtures_builder import Scenario, Step, ToolUse, args, write_fixture
from polling import TIMEOUT

from acp_server.core.content import TextContent
from acp_server.core.events import ToolResult
from acp_server.core.history import expand_history_records
from acp_server.core.output_cut import REPLAY_OUTPUT_LIMIT

pytestmark = pytest.mark.process

TURNS = [
    (
        "Read big.txt",
        [
            Step(text="Reading.", calls=[ToolUse("call_big", "read_file", args(path="big.txt"))]),
            Step(text="Read it."),
        ],
    )
]

BIG = "".join(f"{n:07d} é and some words to fill the line\n" for n in range(4763))
"""200 KiB of text (4,763 lines of 43 bytes), with a two-byte character on every line."""


def serve(fixture: Path, sessions: Path) -> AcpProcess:
    server = AcpProcess(sessions, "--replay", str(fixture), "--titles", "off")
    server.initialize()
    return server


def tool_results(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]


def test_a_load_cuts_a_200_kib_output_to_64_kib_and_a_page_at_its_seq_gives_the_whole(
    tmp_path: Path,
) -> None:
    assert len(BIG.encode()) == 204_809
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "big.txt").write_text(BIG)
    fixture = write_fixture(tmp_path / "fixture", Scenario(TURNS))
    sessions = tmp_path / "sessions"
    setup = {"cwd": str(workspace), "mcpServers": []}

    with serve(fixture, sessions) as first:
        session_id = first.result("session/new", setup)["sessionId"]
        answer, frames = first.exchange(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "Read big.txt"}]},
            timeout=TIMEOUT,
        )
        assert answer["result"] == {"stopReason": "end_turn"}
        assert first.finish() == 0
    [live] = tool_results([f["params"]["update"] for f in frames])
    [live_content] = live["content"]
    whole = live_content["content"]["text"]
    assert whole == BIG  # the live turn shows every byte
    assert "_meta" not in live

    with serve(fixture, sessions) as second:
        load_params = {
            "sessionId": session_id,
            **setup,
            "_meta": {"acp-server": {"replay": {"maxMessages": 50}}},
        }
        loaded, frames = second.exchange("session/load", load_params, timeout=TIMEOUT)
        assert "result" in loaded, loaded
        [replayed] = tool_results([f["params"]["update"] for f in frames])
        cut = replayed["_meta"]["acp-server"]["cut"]
        page = second.result(
            "session.page",
            {
                "address": {"kind": "session", "sessionId": session_id},
                "throughSeq": cut["seq"],
                "maxMessages": 1,
            },
        )
        assert second.finish() == 0
        for line in second.stdout_lines:
            frame = assert_jsonrpc_frame(line)
            if frame.get("method") == "session/update":
                exact(TO_CLIENT_PARAMS["session/update"], frame["params"], "session/update")
            elif frame.get("id") == loaded["id"]:
                exact(AGENT_RESULTS["session/load"], frame["result"], "the load's result")

    shown = whole.encode()[:REPLAY_OUTPUT_LIMIT].decode(errors="ignore")
    assert replayed["content"] == [{"type": "content", "content": {"type": "text", "text": shown}}]
    assert shown == BIG[: 1524 * 42] + "0001"  # 1,524 lines of 43 bytes, 4 bytes more
    assert "rawOutput" not in replayed
    raw = live["rawOutput"]  # the text, then the raw output, left out
    assert raw == {"path": str(workspace.resolve() / "big.txt"), "truncated": False}
    assert cut["bytes"] == 204_809 + len(json.dumps(raw, separators=(",", ":")))
    [stored] = [r for r in expand_history_records(page["records"]) if r.seq == cut["seq"]]
    assert type(stored) is ToolResult
    assert stored.data.call_id == "call_big"
    assert stored.data.content == [TextContent(whole)]
