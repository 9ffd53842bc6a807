"""ACP v2 `session/resume` with `replayFrom` through the real server, on each store engine.

A first process records a session over v1 (`PromptServer`); a fresh process resumes it over v2.
Without `replayFrom` no message is replayed; from the start every message is replayed whole
(`user_message`, `agent_message`, `agent_thought`, never chunks), in order, with the ids the
live turn showed, all before the answer, after one `state_update`; from a message, exactly the
messages after it. Every frame the v2 connection writes is checked against the TypeScript SDK
2.4.0's v2 schema.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step, ToolUse, args, write_fixture
from prompt_harness import PromptServer
from sdk_schema import check_v2

pytestmark = pytest.mark.process

SCENARIO = Scenario(
    [
        ("First?", [Step(text="One.", reasoning="Thinking once.")]),
        (
            "Second?",
            [
                Step(calls=[ToolUse("call_read", "read_file", args(path="hello.txt"))]),
                Step(text="Two."),
            ],
        ),
        ("Third?", [Step(text="Three.")]),
    ]
)
PROMPTS = ["First?", "Second?", "Third?"]
MESSAGE_KINDS = {
    "user_message",
    "agent_message",
    "agent_thought",
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
}


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/sessions.db"
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "sessions")


def record_v1(tmp_path: Path, store: str | None = None) -> str:
    """A three-turn session made over v1 in a process of its own."""
    (tmp_path / "workspace").mkdir(parents=True, exist_ok=True)
    (tmp_path / "workspace" / "hello.txt").write_text("hello\n")
    with PromptServer(tmp_path, SCENARIO, store=store) as server:
        session_id = server.new_session()
        for text in PROMPTS:
            assert server.prompt(session_id, text).stop_reason == "end_turn"
    return session_id


class V2Client:
    """A fresh server process spoken to over v2: each frame it writes checked against the
    SDK's v2 schema."""

    def __init__(self, tmp_path: Path, store: str | None, *, env: dict[str, str] | None = None):
        self.workspace = str((tmp_path / "workspace").resolve())
        fixture = write_fixture(tmp_path / "fixture-v2", SCENARIO)
        extra = ("--replay", str(fixture), "--titles", "off")
        if store is None:
            self.process = AcpProcess(tmp_path / "sessions", *extra, env=env)
        else:
            self.process = AcpProcess(None, "--store", store, *extra, env=env)
        answer, _ = self.exchange("initialize", {"protocolVersion": 2, "info": INFO})
        assert answer["result"]["protocolVersion"] == 2

    def exchange(self, method: str, params: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        response, before = self.process.exchange(method, params)
        for frame in before:
            check_v2("AgentNotification", frame)
        return response, before

    def resume(self, session_id: str, **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The answer to a `session/resume` and the updates before it (their `update`s)."""
        params = {"sessionId": session_id, "cwd": self.workspace, **extra}
        response, before = self.exchange("session/resume", params)
        self.answered = len(self.process.stdout_lines)
        if "result" in response:
            check_v2("ResumeSessionResponse", response["result"])
        assert all(f["method"] == "session/update" for f in before)
        assert all(f["params"]["sessionId"] == session_id for f in before)
        return response, [f["params"]["update"] for f in before]

    def after_answer(self) -> list[dict[str, Any]]:
        """Every frame the server wrote after the last `session/resume` answer, until it
        exited at the end of its input."""
        assert self.process.finish() == 0
        frames = [json.loads(line) for line in self.process.stdout_lines[self.answered :]]
        for frame in frames:
            check_v2("AgentNotification", frame)
        return frames


INFO = {"name": "v2-resume-test", "version": "1"}


def messages(updates: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(kind, messageId, text) of each message update, in order."""
    return [
        (u["sessionUpdate"], u["messageId"], "".join(b.get("text", "") for b in u["content"]))
        for u in updates
        if u["sessionUpdate"] in MESSAGE_KINDS
    ]


WHOLE_HISTORY = [
    ("user_message", "user-0", "First?"),
    ("agent_thought", "assistant-0-0", "Thinking once."),
    ("agent_message", "assistant-0-0", "One."),
    ("user_message", "user-1", "Second?"),
    ("agent_message", "assistant-1-1", "Two."),
    ("user_message", "user-2", "Third?"),
    ("agent_message", "assistant-2-0", "Three."),
]


def test_resume_without_replay_from_replays_no_message_and_says_idle(tmp_path: Path) -> None:
    session_id = record_v1(tmp_path)
    client = V2Client(tmp_path, None)
    response, updates = client.resume(session_id)
    assert set(response["result"]) == {"configOptions", "availableCommands"}
    assert updates == [{"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}]
    assert client.after_answer() == []


def test_resume_with_null_replay_from_replays_nothing(tmp_path: Path) -> None:
    session_id = record_v1(tmp_path)
    client = V2Client(tmp_path, None)
    _, updates = client.resume(session_id, replayFrom=None)
    assert [u["sessionUpdate"] for u in updates] == ["state_update"]


def test_resume_from_start_replays_every_message_whole_in_order_before_the_answer(
    tmp_path: Path, store_url: str
) -> None:
    session_id = record_v1(tmp_path, store_url)
    client = V2Client(tmp_path, store_url)
    _, updates = client.resume(session_id, replayFrom={"type": "start"})
    assert messages(updates) == WHOLE_HISTORY
    kinds = [u["sessionUpdate"] for u in updates]
    assert not any(k.endswith("_chunk") for k in kinds)
    assert kinds.count("tool_call_update") == 2  # v2 shows a call and its result as patches
    assert kinds[-1] == "state_update"
    assert updates[-1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
    }
    # Nothing but notices may follow the answer.
    later = client.after_answer()
    assert [f for f in later if f["params"]["update"]["sessionUpdate"] != "notice"] == []


def test_a_tool_call_and_its_result_are_replayed_where_they_happened(tmp_path: Path) -> None:
    session_id = record_v1(tmp_path)
    client = V2Client(tmp_path, None)
    _, updates = client.resume(session_id, replayFrom={"type": "start"})
    kinds = [u["sessionUpdate"] for u in updates]
    start = kinds.index("tool_call_update")
    assert kinds[start - 1 : start + 3] == [
        "user_message",
        "tool_call_update",
        "tool_call_update",
        "agent_message",
    ]
    assert [u["toolCallId"] for u in updates[start : start + 2]] == ["call_read", "call_read"]
    assert updates[start + 1]["status"] == "completed"


def test_resume_after_a_message_replays_exactly_the_messages_after_it(tmp_path: Path) -> None:
    session_id = record_v1(tmp_path)
    client = V2Client(tmp_path, None)
    cursor = {"type": "_after_message", "messageId": "assistant-0-0"}
    _, updates = client.resume(session_id, replayFrom=cursor)
    assert messages(updates) == WHOLE_HISTORY[3:]
    cursor = {"type": "_after_message", "messageId": "user-2"}
    _, updates = client.resume(session_id, replayFrom=cursor)
    assert messages(updates) == WHOLE_HISTORY[6:]


def test_resuming_a_live_session_again_and_again_works(tmp_path: Path) -> None:
    session_id = record_v1(tmp_path)
    client = V2Client(tmp_path, None)
    for _ in range(3):
        response, updates = client.resume(session_id, replayFrom={"type": "start"})
        assert "result" in response
        assert messages(updates) == WHOLE_HISTORY


def test_a_session_bigger_than_a_replay_page_replays_fully_and_in_order(tmp_path: Path) -> None:
    session_id = record_v1(tmp_path)
    # Each page a few events: every turn is carried whole across page reads.
    client = V2Client(tmp_path, None, env={**os.environ, "ACP_SERVER_REPLAY_PAGE": "3"})
    _, updates = client.resume(session_id, replayFrom={"type": "start"})
    assert messages(updates) == WHOLE_HISTORY


@pytest.mark.parametrize(
    ("replay_from", "path"),
    [
        ({"type": "end"}, "$.replayFrom.type"),
        ({"type": "_after_message", "messageId": "user-9"}, "$.replayFrom.messageId"),
        ({"type": "_after_message"}, "$.replayFrom.messageId"),
        ({"type": 3}, "$.replayFrom.type"),
        ("start", "$.replayFrom"),
    ],
)
def test_a_cursor_the_agent_does_not_take_is_refused_naming_it(
    tmp_path: Path, replay_from: Any, path: str
) -> None:
    session_id = record_v1(tmp_path)
    client = V2Client(tmp_path, None)
    response, updates = client.resume(session_id, replayFrom=replay_from)
    assert response["error"]["code"] == -32602
    assert response["error"]["data"] == {"path": path}
    assert messages(updates) == []
