"""ACP v2 prompt turns over `serve --listen` (the replay provider, paced): a v2 `session/prompt`
is answered at once with its receipt, the prompter is shown its message whole with that id,
then `state_update` running, the turn's updates (each with its message id, in v2's shapes) and
idle with the stop reason; a cancel ends it idle `cancelled` with no state after; a permission
request is `requires_action` then `running`; a v1 client of the same session never sees the
v2-only kinds. Each session is made by a v1 client (v2 drives it by prompting: a prompt
attaches its client)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step, ToolUse, args, write_fixture
from sdk_schema import check_v2
from shared_sessions import (
    AGENT,
    LONG,
    USER,
    WRITE,
    client,
    new_session,
    read_until,
    serving,
    texts,
)
from ws_server import Listening, Peer, PeerError

from acp_server.agent.tool_calls import CANCELLED_CALL
from acp_server.server.errors import ModelRequestError

pytestmark = pytest.mark.process

GO = [{"type": "text", "text": "go"}]

V2_ONLY = {"state_update", "user_message", "agent_message", "agent_thought"}
MESSAGE_KINDS = {
    "user_message",
    "user_message_chunk",
    "agent_message",
    "agent_message_chunk",
    "agent_thought",
    "agent_thought_chunk",
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def v2_client(server: Listening) -> Peer:
    peer = server.connect()
    answer = peer.request(
        "initialize", {"protocolVersion": 2, "info": {"name": "test", "version": "0"}}
    )
    assert answer["protocolVersion"] == 2
    return peer


def prompt(peer: Peer, session_id: str, text: str) -> int:
    return peer.start(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    )


def shown(peer: Peer, session_id: str) -> list[dict[str, Any]]:
    """The `session/update`s `peer` was sent, each held to the v2 schema and of `session_id`."""
    updates = []
    for note in peer.notifications:
        if note["method"] == "session/update":
            check_v2("UpdateSessionNotification", note["params"])
            assert note["params"]["sessionId"] == session_id
            updates.append(note["params"]["update"])
    return updates


def v1_updates(peer: Peer) -> list[dict[str, Any]]:
    return [n["params"]["update"] for n in peer.notifications if n["method"] == "session/update"]


def states(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in u.items() if k != "sessionUpdate"}
        for u in updates
        if u["sessionUpdate"] == "state_update"
    ]


def idle(updates: list[dict[str, Any]]) -> bool:
    return any(s["state"] == "idle" for s in states(updates))


def read_to_idle(peer: Peer, session_id: str, count: int = 1) -> list[dict[str, Any]]:
    """Read `peer`'s frames until the `count`th idle state; what it was shown."""
    read_until(
        peer,
        lambda: sum(s["state"] == "idle" for s in states(shown(peer, session_id))) >= count,
        "the turn ends",
    )
    return shown(peer, session_id)


def test_a_v2_prompt_is_answered_with_its_receipt_then_its_message_running_replies_and_idle(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text="Hello there.")])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)

        assert b.answer(prompt(b, session_id, "go")) == {"messageId": "user-0-0"}
        updates = read_to_idle(b, session_id)

        assert updates[0] == {
            "sessionUpdate": "user_message",
            "messageId": "user-0-0",
            "content": [{"type": "text", "text": "go"}],
        }
        assert states(updates) == [
            {"state": "running"},
            {"state": "idle", "stopReason": "end_turn"},
        ]
        assert updates[1]["sessionUpdate"] == "state_update"
        assert updates[-1]["sessionUpdate"] == "state_update"
        replies = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
        assert "".join(u["content"]["text"] for u in replies) == "Hello there."
        assert {u["messageId"] for u in replies} == {"assistant-0-0"}
        assert all(u.get("messageId") for u in updates if u["sessionUpdate"] in MESSAGE_KINDS)
        users = [e for e in a.events(session_id) if e["type"] == "user/message"]
        assert [u["data"]["message"]["id"] for u in users] == ["user-0-0"]


def test_a_v1_client_of_the_same_session_never_sees_the_v2_only_kinds(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text="Hello there.")])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)
        b.answer(prompt(b, session_id, "go"))
        read_to_idle(b, session_id)

        read_until(a, lambda: texts(v1_updates(a)).get(AGENT) == "Hello there.", "A has it")
        kinds = {u["sessionUpdate"] for u in v1_updates(a)}
        assert kinds & V2_ONLY == set()
        assert texts(v1_updates(a)) == {
            ("user_message_chunk", "user-0-0"): "go",
            AGENT: "Hello there.",
        }


def test_another_v2_client_is_shown_the_prompt_whole_and_the_turns_states(
    tmp_path: Path, workspace: Path
) -> None:
    scenario = Scenario([("go", [Step(text="Hello there.")]), ("hello", [Step(text="Hi.")])])
    with serving(tmp_path, scenario) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b, c = v2_client(server), v2_client(server)
        c_prompt = prompt(c, session_id, "hello")  # attaches C; it waits behind B's turn
        b_id = b.answer(prompt(b, session_id, "go"))["messageId"]
        c_id = c.answer(c_prompt)["messageId"]
        read_to_idle(b, session_id, 2)
        watched = read_to_idle(c, session_id, 2)

        assert {b_id, c_id} == {"user-0-0", "user-0-1"}
        whole = [u for u in watched if u["sessionUpdate"] == "user_message"]
        assert {u["messageId"] for u in whole} == {b_id, c_id}
        assert [u for u in watched if u["sessionUpdate"] == "user_message_chunk"] == []
        assert states(watched) == [
            {"state": "running"},
            {"state": "idle", "stopReason": "end_turn"},
            {"state": "running"},
            {"state": "idle", "stopReason": "end_turn"},
        ]


def test_two_turns_have_different_receipts(tmp_path: Path, workspace: Path) -> None:
    scenario = Scenario([("one", [Step(text="One.")]), ("two", [Step(text="Two.")])])
    with serving(tmp_path, scenario) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)
        first = b.answer(prompt(b, session_id, "one"))
        read_to_idle(b, session_id)
        second = b.answer(prompt(b, session_id, "two"))
        read_to_idle(b, session_id, 2)

        assert (first, second) == ({"messageId": "user-0-0"}, {"messageId": "user-1-1"})


def test_a_cancel_ends_the_turn_idle_cancelled_and_no_state_follows(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)
        b.answer(prompt(b, session_id, "go"))
        read_until(b, lambda: bool(texts(shown(b, session_id))), "the turn streams")

        b.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
        read_to_idle(b, session_id)
        b.request("session/status", {"sessionId": session_id})  # all sent before its answer

        assert states(shown(b, session_id)) == [
            {"state": "running"},
            {"state": "idle", "stopReason": "cancelled"},
        ]


def test_a_permission_request_is_v2_shaped_and_the_state_requires_action_then_runs(
    tmp_path: Path, workspace: Path
) -> None:
    scenario = Scenario([("go", [Step(calls=[WRITE]), Step(text="Done.")])])
    with serving(tmp_path, scenario) as server:
        a = client(server)
        a.answer_server = False  # only B answers
        session_id = new_session(a, workspace)
        b = v2_client(server)
        b.answer(prompt(b, session_id, "go"))
        updates = read_to_idle(b, session_id)

        [asked] = b.server_requests
        check_v2("RequestPermissionRequest", asked["params"])
        assert asked["params"]["title"]
        assert asked["params"]["subject"]["toolCall"]["toolCallId"] == "call_w"
        assert states(updates) == [
            {"state": "running"},
            {"state": "requires_action"},
            {"state": "running"},
            {"state": "idle", "stopReason": "end_turn"},
        ]
        calls = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
        assert calls[0]["title"]
        assert calls[0]["name"] == "write_file"
        assert calls[-1]["status"] == "completed"
        assert (workspace / "a.txt").read_text() == "A"


def test_a_v1_prompt_is_answered_as_before(tmp_path: Path, workspace: Path) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text="Hello there.")])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        assert a.answer(prompt(a, session_id, "go")) == {"stopReason": "end_turn"}
        assert {u["sessionUpdate"] for u in v1_updates(a)} & V2_ONLY == set()
        assert texts(v1_updates(a)) == {AGENT: "Hello there."}
        assert USER not in texts(v1_updates(a))


SLEEPER = ToolUse(
    "call_run",
    "run_command",
    args(command=sys.executable, args=["-c", "import time; time.sleep(60)"]),
)
"""A tool call that runs until it is cancelled."""


def test_tool_call_cancel_ends_that_call_cancelled_and_the_turn_goes_on(
    tmp_path: Path, workspace: Path
) -> None:
    scenario = Scenario([("go", [Step(calls=[SLEEPER]), Step(text="Done.")])])
    with serving(tmp_path, scenario) as server:
        a = client(server)
        a.answer_server = False
        session_id = new_session(a, workspace)
        b = v2_client(server)
        b.answer(prompt(b, session_id, "go"))

        def running() -> bool:
            return any(
                u["sessionUpdate"] == "tool_call_update" and u.get("status") == "in_progress"
                for u in shown(b, session_id)
            )

        read_until(b, running, "the command runs")
        cancel = {"sessionId": session_id, "toolCallId": "call_run"}
        assert b.request("tool_call/cancel", cancel) == {}
        updates = read_to_idle(b, session_id)

        last = [u for u in updates if u["sessionUpdate"] == "tool_call_update"][-1]
        assert last["status"] == "failed"
        assert last["content"] == [
            {"type": "content", "content": {"type": "text", "text": CANCELLED_CALL}}
        ]
        assert states(updates)[-1] == {"state": "idle", "stopReason": "end_turn"}
        assert texts(updates)[("agent_message_chunk", "assistant-0-1")] == "Done."


def test_tool_call_cancel_of_no_running_call_names_the_tool_call_id(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text="Hi.")])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)
        b.answer(prompt(b, session_id, "go"))
        read_to_idle(b, session_id)

        with pytest.raises(PeerError) as refused:
            b.request("tool_call/cancel", {"sessionId": session_id, "toolCallId": "call_none"})
        assert (refused.value.code, refused.value.data) == (-32602, {"path": "$.toolCallId"})


def test_terminal_cancel_names_no_terminal(tmp_path: Path, workspace: Path) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text="Hi.")])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)

        with pytest.raises(PeerError) as refused:
            b.request("terminal/cancel", {"sessionId": session_id, "terminalId": "term_1"})
        assert (refused.value.code, refused.value.data) == (-32602, {"path": "$.terminalId"})
        assert (
            refused.value.message
            == "Invalid params: no such terminal: 'term_1' - at `$.terminalId`"
        )


def test_closing_a_session_whose_turn_runs_ends_it_idle_cancelled_before_the_answer(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)
        b.answer(prompt(b, session_id, "go"))  # attaches B
        a.request("session/close", {"sessionId": session_id})  # B alone holds it now
        read_until(b, lambda: bool(texts(shown(b, session_id))), "the turn streams")

        closing = b.start("session/close", {"sessionId": session_id})
        # Read up to the idle first: an answer before it would be read (and lost) meanwhile.
        read_until(b, lambda: idle(shown(b, session_id)), "the turn ends")
        assert b.answer(closing) == {}
        b.request("session/status", {"sessionId": session_id})  # all sent before its answer

        assert states(shown(b, session_id)) == [
            {"state": "running"},
            {"state": "idle", "stopReason": "cancelled"},
        ]
        ended = [e["data"]["reason"] for e in a.events(session_id) if e["type"] == "turn/end"]
        assert ended == [{"kind": "cancelled"}]


def test_a_failed_turn_ends_idle_error_with_the_error(tmp_path: Path, workspace: Path) -> None:
    # SDK 2.4.0's `stopReason: "error"` (the conformance kit's draft has no such stop reason).
    with serving(tmp_path, Scenario([("go", [Step(text="Once.")])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)
        b.answer(prompt(b, session_id, "go"))
        read_to_idle(b, session_id)
        b.answer(prompt(b, session_id, "again"))  # the recording has one model call only
        updates = read_to_idle(b, session_id, 2)

        ended = states(updates)[-1]
        assert (ended["state"], ended["stopReason"], ended["error"]["code"]) == (
            "idle",
            "error",
            ModelRequestError.CODE,
        )
        assert "exhausted" in ended["error"]["message"]


def test_a_command_is_a_turn_too(tmp_path: Path, workspace: Path) -> None:
    with serving(tmp_path, Scenario([])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        b = v2_client(server)
        assert b.answer(prompt(b, session_id, "/stats")) == {"messageId": "user-0-0"}
        updates = read_to_idle(b, session_id)

        assert states(updates) == [
            {"state": "running"},
            {"state": "idle", "stopReason": "end_turn"},
        ]
        answer = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
        assert [u["messageId"] for u in answer] == ["command-0"]


# Over stdio: one v2 client, no services (its turns run on its connection).


@contextmanager
def stdio(tmp_path: Path, scenario: Scenario) -> Iterator[AcpProcess]:
    fixture = write_fixture(tmp_path / "fixture", scenario)
    with AcpProcess(tmp_path / "sessions", "--replay", str(fixture), "--pace-ms", "10") as process:
        answer = process.result(
            "initialize", {"protocolVersion": 2, "info": {"name": "test", "version": "0"}}
        )
        assert answer["protocolVersion"] == 2
        yield process


def read_updates_to_idle(server: AcpProcess, session_id: str) -> list[dict[str, Any]]:
    """The `session/update`s read up to the first idle state, each held to the v2 schema."""
    updates: list[dict[str, Any]] = []
    while not idle(updates):
        frame = server.read_frame()
        assert frame.get("method") == "session/update", frame
        check_v2("UpdateSessionNotification", frame["params"])
        assert frame["params"]["sessionId"] == session_id
        updates.append(frame["params"]["update"])
    return updates


def test_over_stdio_a_v2_turn_is_its_receipt_message_running_replies_and_idle(
    tmp_path: Path, workspace: Path
) -> None:
    with stdio(tmp_path, Scenario([("go", [Step(text="Hello there.")])])) as server:
        session_id = server.result("session/new", {"cwd": str(workspace)})["sessionId"]
        assert server.result("session/prompt", {"sessionId": session_id, "prompt": GO}) == {
            "messageId": "user-0-0"
        }
        updates = read_updates_to_idle(server, session_id)

        assert [u["sessionUpdate"] for u in updates[:2]] == ["user_message", "state_update"]
        assert updates[0]["messageId"] == "user-0-0"
        assert states(updates) == [
            {"state": "running"},
            {"state": "idle", "stopReason": "end_turn"},
        ]
        assert texts(updates) == {AGENT: "Hello there."}


def test_over_stdio_a_cancel_ends_the_turn_idle_cancelled(tmp_path: Path, workspace: Path) -> None:
    with stdio(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        session_id = server.result("session/new", {"cwd": str(workspace)})["sessionId"]
        server.result("session/prompt", {"sessionId": session_id, "prompt": GO})
        seen: list[dict[str, Any]] = []
        while not texts(seen):
            seen.append(server.read_frame()["params"]["update"])
        server.notify("session/cancel", {"sessionId": session_id})
        seen += read_updates_to_idle(server, session_id)

        assert states(seen) == [{"state": "running"}, {"state": "idle", "stopReason": "cancelled"}]
        # The next frame is this answer (`response` fails on any other): nothing followed idle.
        assert "result" in server.request("session/list", {})


def test_over_stdio_a_cancel_read_with_its_prompt_ends_that_turn_cancelled(
    tmp_path: Path, workspace: Path
) -> None:
    with stdio(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        session_id = server.result("session/new", {"cwd": str(workspace)})["sessionId"]
        prompt_ = {
            "jsonrpc": "2.0",
            "id": "go",
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": GO},
        }
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        server.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in (prompt_, cancel)))
        assert server.read_frame() == {
            "jsonrpc": "2.0",
            "id": "go",
            "result": {"messageId": "user-0-0"},
        }
        updates = read_updates_to_idle(server, session_id)

        assert updates[0] == {
            "sessionUpdate": "user_message",
            "messageId": "user-0-0",
            "content": GO,
        }
        assert states(updates) == [
            {"state": "running"},
            {"state": "idle", "stopReason": "cancelled"},
        ]
        assert texts(updates) == {}
