"""Many clients on one live session, over `serve --listen` (SPEC 4): every client that creates,
resumes or loads a session is sent its live updates, a turn goes on when the client that
prompted goes, a prompt while a turn runs waits in the session's queue, a permission request
goes to every attached client (the first answer wins), and `session/cancel` from any of them
cancels. Each test runs a real server process (the replay provider, paced) and two or three
WebSocket clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step
from polling import wait_until
from shared_sessions import (
    AGENT,
    LONG,
    NOTICES,
    QUEUED,
    USER,
    WRITE,
    client,
    load,
    log_types,
    new_session,
    prompt,
    queued_notices,
    read_until,
    serving,
    texts,
    updates,
    withdrawn,
)
from ws_server import Listening, Peer, PeerError

pytestmark = pytest.mark.process


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def loaded_texts(server: Listening, session_id: str, workspace: Path) -> dict[tuple[str, str], str]:
    """What a fresh client's `session/load` shows of the session's messages."""
    fresh = client(server)
    fresh.answer(load(fresh, session_id, workspace))
    return texts(updates(fresh))


def test_a_prompt_from_one_client_streams_to_another_that_loaded_the_session(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        a, b = client(server), client(server)
        session_id = new_session(a, workspace)
        b.answer(load(b, session_id, workspace))

        assert a.answer(prompt(a, session_id, "go")) == {"stopReason": "end_turn"}
        read_until(b, lambda: texts(updates(b)).get(AGENT) == LONG, "B has the whole reply")
        assert texts(updates(b)) == loaded_texts(server, session_id, workspace)
        assert texts(updates(b)) == {USER: "go", AGENT: LONG}


def test_a_load_during_a_running_turn_replays_it_then_streams_the_rest_without_gap_or_repeat(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        a, b = client(server), client(server)
        session_id = new_session(a, workspace)
        prompted = prompt(a, session_id, "go")
        read_until(a, lambda: len(texts(updates(a)).get(AGENT, "")) > 20, "the turn streams")

        b.answer(load(b, session_id, workspace))
        assert a.answer(prompted) == {"stopReason": "end_turn"}
        read_until(b, lambda: texts(updates(b)).get(AGENT) == LONG, "B has the whole reply")

        assert texts(updates(b)) == {USER: "go", AGENT: LONG}
        assert texts(updates(a)) == {AGENT: LONG}


def test_a_turn_goes_on_when_its_client_goes_and_the_next_load_shows_it_whole(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        prompt(a, session_id, "go")
        read_until(a, lambda: len(texts(updates(a)).get(AGENT, "")) > 20, "the turn streams")
        a.close()

        c = client(server)
        wait_until(lambda: "turn/end" in log_types(c, session_id), "the turn ends")
        ended = [e for e in c.events(session_id) if e["type"] == "turn/end"]
        assert [e["data"]["reason"] for e in ended] == [{"kind": "completed"}]
        assert loaded_texts(server, session_id, workspace) == {USER: "go", AGENT: LONG}


def test_a_prompt_while_a_turn_runs_is_queued_answered_in_order_and_every_client_told(
    tmp_path: Path, workspace: Path
) -> None:
    scenario = Scenario([("first", [Step(text=LONG)]), ("second", [Step(text="Second.")])])
    with serving(tmp_path, scenario) as server:
        a, b = client(server, NOTICES), client(server, NOTICES)
        session_id = new_session(a, workspace)
        b.answer(load(b, session_id, workspace))
        first = prompt(a, session_id, "first")
        read_until(a, lambda: bool(texts(updates(a))), "the first turn streams")

        second = prompt(b, session_id, "second")
        assert b.answer(second) == {"stopReason": "end_turn"}
        assert a.answer(first) == {"stopReason": "end_turn"}
        read_until(a, lambda: bool(queued_notices(a)), "A is told")

        assert queued_notices(a) == queued_notices(b) == [QUEUED]
        users = [e for e in a.events(session_id) if e["type"] == "user/message"]
        assert [u["data"]["message"]["content"][0]["text"] for u in users] == ["first", "second"]


def test_a_seventeenth_queued_prompt_is_refused_naming_the_session_id(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        prompt(a, session_id, "go")
        read_until(a, lambda: bool(texts(updates(a))), "the turn streams")
        queued = [prompt(a, session_id, f"wait {n}") for n in range(16)]

        with pytest.raises(PeerError) as refused:
            a.answer(prompt(a, session_id, "one too many"))
        assert (refused.value.code, refused.value.data) == (-32602, {"path": "$.sessionId"})
        a.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
        assert [a.answer(q) for q in queued] == [{"stopReason": "cancelled"}] * 16


def test_a_cancel_from_another_attached_client_cancels_the_running_turn(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        a, b = client(server), client(server)
        session_id = new_session(a, workspace)
        b.answer(load(b, session_id, workspace))
        prompted = prompt(a, session_id, "go")
        read_until(a, lambda: bool(texts(updates(a))), "the turn streams")

        b.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
        assert a.answer(prompted) == {"stopReason": "cancelled"}


def test_a_permission_answered_by_one_client_wins_and_the_others_request_is_withdrawn(
    tmp_path: Path, workspace: Path
) -> None:
    scenario = Scenario([("go", [Step(calls=[WRITE]), Step(text="Done.")])])
    with serving(tmp_path, scenario) as server:
        a, b = client(server), client(server)
        a.answer_server = False  # A only watches its request
        session_id = new_session(a, workspace)
        b.answer(load(b, session_id, workspace))
        prompted = prompt(a, session_id, "go")
        read_until(a, lambda: bool(a.server_requests), "A is asked")

        read_until(b, lambda: bool(b.server_requests), "B is asked")
        assert a.answer(prompted) == {"stopReason": "end_turn"}
        read_until(a, lambda: bool(withdrawn(a)), "A's request is withdrawn")
        assert withdrawn(a) == [{"requestId": a.server_requests[0]["id"]}]
        decisions = [e["data"] for e in a.events(session_id) if e["type"] == "permission/decision"]
        assert decisions == [
            {
                "turn": 0,
                "step": 0,
                "callId": "call_w",
                "outcome": "selected",
                "optionId": "allow_once",
            }
        ]
        assert (workspace / "a.txt").read_text() == "A"


def test_a_permission_request_with_no_client_attached_times_out_and_is_logged(
    tmp_path: Path, workspace: Path
) -> None:
    scenario = Scenario([("go", [Step(calls=[WRITE]), Step(text="Done.")])])
    with serving(tmp_path, scenario, "--detached-permission-timeout", "1") as server:
        a = client(server)
        a.answer_server = False
        session_id = new_session(a, workspace)
        prompt(a, session_id, "go")
        read_until(a, lambda: bool(a.server_requests), "A is asked")
        a.close()

        c = client(server)
        wait_until(lambda: "turn/end" in log_types(c, session_id), "the turn ends")
        decisions = [e["data"] for e in c.events(session_id) if e["type"] == "permission/decision"]
        assert decisions == [{"turn": 0, "step": 0, "callId": "call_w", "outcome": "timeout"}]
        assert not (workspace / "a.txt").exists()


def test_a_mode_change_from_one_client_reaches_the_other(tmp_path: Path, workspace: Path) -> None:
    with serving(tmp_path, Scenario([])) as server:
        a, b = client(server), client(server)
        session_id = new_session(a, workspace)
        b.answer(load(b, session_id, workspace))
        b.request("session/set_mode", {"sessionId": session_id, "modeId": "plan"})

        read_until(a, lambda: bool(mode_updates(a)), "A is told")
        assert mode_updates(a) == [
            {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
        ]


def mode_updates(peer: Peer) -> list[dict[str, Any]]:
    return [u for u in updates(peer) if u["sessionUpdate"] == "current_mode_update"]


def test_cancel_request_of_a_prompt_still_cancels_its_turn(tmp_path: Path, workspace: Path) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text=LONG)])])) as server:
        a = client(server)
        session_id = new_session(a, workspace)
        prompted = prompt(a, session_id, "go")
        read_until(a, lambda: bool(texts(updates(a))), "the turn streams")

        a.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": prompted}})
        with pytest.raises(PeerError) as cancelled:
            a.answer(prompted)
        assert cancelled.value.code == -32800
        wait_until(lambda: "turn/end" in log_types(a, session_id), "the turn ends")
        ended = [e for e in a.events(session_id) if e["type"] == "turn/end"]
        assert [e["data"]["reason"] for e in ended] == [{"kind": "cancelled"}]


def test_a_close_detaches_its_client_and_the_last_clients_close_closes_the_session(
    tmp_path: Path, workspace: Path
) -> None:
    with serving(tmp_path, Scenario([("go", [Step(text="Hi.")])])) as server:
        a, b = client(server), client(server)
        session_id = new_session(a, workspace)
        b.answer(load(b, session_id, workspace))
        status = {"sessionId": session_id}

        a.request("session/close", status)
        still = a.request("session/status", status)["status"]
        assert b.answer(prompt(b, session_id, "go")) == {"stopReason": "end_turn"}
        b.request("session/close", status)
        assert (still, a.request("session/status", status)["status"]) == ("open", "saved")
