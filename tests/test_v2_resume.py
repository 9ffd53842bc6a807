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
from shared_sessions import WRITE, client, new_session, read_until
from ws_server import Peer, listening

from acp_server.client import default_answer

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
        ("Fourth?", [Step(text="Four.")]),  # a v2 turn after the three made over v1
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

    def next_update(self) -> dict[str, Any]:
        """The next `session/update`'s update (checked against the v2 schema)."""
        frame = self.process.read_frame()
        check_v2("AgentNotification", frame)
        assert frame["method"] == "session/update"
        update: dict[str, Any] = frame["params"]["update"]
        return update

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


def test_a_v1_session_takes_a_v2_turn_and_loads_back_over_v1(
    tmp_path: Path, store_url: str
) -> None:
    session_id = record_v1(tmp_path, store_url)
    v2 = V2Client(tmp_path, store_url)
    v2.resume(session_id)
    receipt, _ = v2.exchange("session/prompt", {"sessionId": session_id, "prompt": [TEXT4]})
    message_id = receipt["result"]["messageId"]
    update = v2.next_update()
    while update.get("state") != "idle":  # the turn's updates, to its end
        update = v2.next_update()
    assert update == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    assert v2.process.finish() == 0

    with PromptServer(tmp_path, SCENARIO, store=store_url) as v1:
        loaded = v1.request(
            "session/load", {"sessionId": session_id, "cwd": str(v1.workspace), "mcpServers": []}
        )
    shown = [
        (u["sessionUpdate"], u["content"]["text"])
        for u in loaded.updates
        if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
    ]
    assert shown[-2:] == [("user_message_chunk", "Fourth?"), ("agent_message_chunk", "Four.")]

    again = V2Client(tmp_path, store_url)
    _, updates = again.resume(session_id, replayFrom={"type": "start"})
    assert messages(updates) == [
        *WHOLE_HISTORY,
        ("user_message", message_id, "Fourth?"),
        ("agent_message", "assistant-3-0", "Four."),
    ]


TEXT4 = {"type": "text", "text": "Fourth?"}


def test_resuming_a_session_whose_turn_waits_shows_it_requires_action_then_its_live_updates(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    fixture = write_fixture(
        tmp_path / "fixture", Scenario([("go", [Step(calls=[WRITE]), Step(text="Done.")])])
    )
    with listening(tmp_path / "sessions", "--replay", str(fixture), "--pace-ms", "10") as server:
        maker = client(server)
        maker.answer_server = False
        session_id = new_session(maker, workspace)
        prompter = v2_peer(server)
        prompter.answer_server = False
        prompter.answer(prompter.start("session/prompt", {"sessionId": session_id, "prompt": [GO]}))
        read_until(prompter, lambda: bool(prompter.server_requests), "the permission request")

        resumer = v2_peer(server)
        resumer.answer_server = False
        resumer.answer(
            resumer.start(
                "session/resume",
                {"sessionId": session_id, "cwd": str(workspace), "replayFrom": {"type": "start"}},
            )
        )
        before = peer_updates(resumer, session_id)
        assert messages(before) == [("user_message", "user-0-0", "go")]
        assert [u["toolCallId"] for u in before if u["sessionUpdate"] == "tool_call_update"] == [
            "call_w"
        ]
        assert before[-1] == {"sessionUpdate": "state_update", "state": "requires_action"}

        [asked] = prompter.server_requests
        answer = default_answer(asked["method"], asked["params"])
        prompter.send({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
        read_until(
            resumer,
            lambda: peer_updates(resumer, session_id)[-1].get("state") == "idle",
            "the turn ends",
        )
        after = peer_updates(resumer, session_id)[len(before) :]
    states = [u for u in after if u["sessionUpdate"] == "state_update"]
    assert states == [
        {"sessionUpdate": "state_update", "state": "running"},
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"},
    ]
    assert not any(u["sessionUpdate"] == "user_message" for u in after)  # no repeat
    replies = [u for u in after if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(u["content"]["text"] for u in replies) == "Done."
    finished = [u for u in after if u["sessionUpdate"] == "tool_call_update"]
    assert finished[-1]["toolCallId"] == "call_w"
    assert finished[-1]["status"] == "completed"


GO = {"type": "text", "text": "go"}


def v2_peer(server: Any) -> Peer:
    peer: Peer = server.connect()
    answer = peer.request("initialize", {"protocolVersion": 2, "info": INFO})
    assert answer["protocolVersion"] == 2
    return peer


def peer_updates(peer: Peer, session_id: str) -> list[dict[str, Any]]:
    """The `session/update`s `peer` was sent so far, each held to the v2 schema."""
    updates = []
    for note in peer.notifications:
        if note["method"] == "session/update":
            check_v2("UpdateSessionNotification", note["params"])
            assert note["params"]["sessionId"] == session_id
            updates.append(note["params"]["update"])
    return updates


def test_resume_takes_additional_directories_and_null_mcp_servers(tmp_path: Path) -> None:
    session_id = record_v1(tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    client = V2Client(tmp_path, None)
    response, updates = client.resume(
        session_id, additionalDirectories=[str(extra)], mcpServers=None
    )
    assert "result" in response
    assert [u["sessionUpdate"] for u in updates] == ["state_update"]


def test_a_system_prompt_of_an_unknown_mode_is_refused_naming_it(tmp_path: Path) -> None:
    session_id = record_v1(tmp_path)
    client = V2Client(tmp_path, None)
    prompt = {"mode": "_nonsense", "content": [{"type": "text", "text": "Be brief."}]}
    response, _ = client.resume(session_id, systemPrompt=prompt)
    assert response["error"]["code"] == -32602
    assert response["error"]["data"] == {"path": "$.systemPrompt.mode"}


def test_the_kits_sequence_new_prompt_close_and_resume_on_one_connection(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    client = V2Client(tmp_path, None)
    new, _ = client.exchange("session/new", {"cwd": client.workspace})
    session_id = new["result"]["sessionId"]
    client.resume(session_id)  # a live session, resumed at once
    receipt, _ = client.exchange("session/prompt", {"sessionId": session_id, "prompt": [FIRST]})
    update = client.next_update()
    while update.get("state") != "idle":
        update = client.next_update()
    closed, _ = client.exchange("session/close", {"sessionId": session_id})
    assert closed["result"] == {}
    _, updates = client.resume(session_id, replayFrom={"type": "start"})
    assert messages(updates) == [
        ("user_message", receipt["result"]["messageId"], "First?"),
        *WHOLE_HISTORY[1:3],
    ]
    assert client.after_answer() == []


FIRST = {"type": "text", "text": "First?"}
