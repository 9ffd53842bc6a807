"""Many clients on one session as users will run them: editors spawn `acp-server attach`
relays, and a browser speaks WebSocket to the shared server the first relay started with
`--listen` (the token kept in its state directory). A prompt from one editor streams to the
others, a second prompt waits in the queue, a permission is answered from the browser, and a
turn whose editor was killed finishes and is whole for the next editor, which reaches the same
server. Each test runs the replay provider, paced, behind one shared server."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from attach_support import Places, RelayLine, places
from fixtures_builder import Scenario, Step, write_fixture
from polling import wait_until
from shared_sessions import (
    AGENT,
    LONG,
    NOTICES,
    QUEUED,
    USER,
    WRITE,
    load,
    log_types,
    new_session,
    prompt,
    queued_notices,
    read_until,
    texts,
    updates,
    withdrawn,
)
from ws_server import Peer

pytestmark = pytest.mark.process

__all__ = ["places"]  # the fixture


@pytest.fixture
def workspace(places: Places) -> Path:
    path = places.cwd / "workspace"
    path.mkdir()
    return path


def flags(tmp_path: Path, scenario: Scenario) -> tuple[str, ...]:
    """The editors' `attach` flags: one store, the scenario replayed paced, the viewer on."""
    fixture = write_fixture(tmp_path / "fixture", scenario)
    return (
        "--sessions-dir",
        str(tmp_path / "sessions"),
        "--replay",
        str(fixture),
        "--pace-ms",
        "10",
        "--listen",
        "127.0.0.1:0",
    )


def loaded_texts(peer: Peer, session_id: str, workspace: Path) -> dict[tuple[str, str], str]:
    """What the `session/load` of `peer` (shown nothing of the session before) shows of its
    messages."""
    peer.answer(load(peer, session_id, workspace))
    return texts(updates(peer))


def test_a_prompt_from_one_editor_streams_to_the_other_and_the_browser_as_a_load_replays_it(
    places: Places, tmp_path: Path, workspace: Path
) -> None:
    editor = flags(tmp_path, Scenario([("go", [Step(text=LONG)])]))
    a = places.editor(*editor)
    session_id = new_session(a, workspace)
    browser = places.browser()
    browser.answer(load(browser, session_id, workspace))
    prompted = prompt(a, session_id, "go")
    read_until(a, lambda: len(texts(updates(a)).get(AGENT, "")) > 20, "the turn streams")

    b = places.editor(*editor)
    b.answer(load(b, session_id, workspace))
    assert a.answer(prompted) == {"stopReason": "end_turn"}
    read_until(b, lambda: texts(updates(b)).get(AGENT) == LONG, "B has the whole reply")
    read_until(browser, lambda: texts(updates(browser)).get(AGENT) == LONG, "the browser has it")

    fresh = places.editor(*editor)
    assert texts(updates(b)) == texts(updates(browser)) == {USER: "go", AGENT: LONG}
    assert loaded_texts(fresh, session_id, workspace) == {USER: "go", AGENT: LONG}
    assert len(places.pids()) == 1


def test_a_prompt_from_one_editor_while_anothers_turn_runs_is_queued_and_both_are_told(
    places: Places, tmp_path: Path, workspace: Path
) -> None:
    scenario = Scenario([("first", [Step(text=LONG)]), ("second", [Step(text="Second.")])])
    editor = flags(tmp_path, scenario)
    a = places.editor(*editor, capabilities=NOTICES)
    b = places.editor(*editor, capabilities=NOTICES)
    session_id = new_session(a, workspace)
    b.answer(load(b, session_id, workspace))
    first = prompt(a, session_id, "first")
    read_until(a, lambda: bool(texts(updates(a))), "the first turn streams")

    second = prompt(b, session_id, "second")
    assert b.answer(second) == {"stopReason": "end_turn"}
    assert a.answer(first) == {"stopReason": "end_turn"}
    read_until(a, lambda: bool(queued_notices(a)), "A is told")

    assert queued_notices(a) == queued_notices(b) == [QUEUED]
    ends = [e["seq"] for e in a.events(session_id) if e["type"] == "turn/end"]
    users = [e for e in a.events(session_id) if e["type"] == "user/message"]
    assert [u["data"]["message"]["content"][0]["text"] for u in users] == ["first", "second"]
    assert len(ends) == 2 and users[1]["seq"] > ends[0]


def test_a_permission_answered_from_the_browser_wins_and_the_editors_requests_are_withdrawn(
    places: Places, tmp_path: Path, workspace: Path
) -> None:
    editor = flags(tmp_path, Scenario([("go", [Step(calls=[WRITE]), Step(text="Done.")])]))
    a, b = places.editor(*editor), places.editor(*editor)
    a.answer_server = b.answer_server = False  # the editors only watch their requests
    session_id = new_session(a, workspace)
    b.answer(load(b, session_id, workspace))
    browser = places.browser()
    browser.answer(load(browser, session_id, workspace))
    prompted = prompt(a, session_id, "go")
    read_until(a, lambda: bool(a.server_requests), "A is asked")
    read_until(b, lambda: bool(b.server_requests), "B is asked")

    read_until(browser, lambda: bool(browser.server_requests), "the browser is asked")
    assert a.answer(prompted) == {"stopReason": "end_turn"}
    read_until(a, lambda: bool(withdrawn(a)), "A's request is withdrawn")
    read_until(b, lambda: bool(withdrawn(b)), "B's request is withdrawn")
    assert withdrawn(a) == [{"requestId": a.server_requests[0]["id"]}]
    assert withdrawn(b) == [{"requestId": b.server_requests[0]["id"]}]
    assert withdrawn(browser) == []
    decisions = [e["data"] for e in a.events(session_id) if e["type"] == "permission/decision"]
    assert decisions == [
        {"turn": 0, "step": 0, "callId": "call_w", "outcome": "selected", "optionId": "allow_once"}
    ]
    assert (workspace / "a.txt").read_text() == "A"


def test_a_turn_whose_editor_was_killed_finishes_and_the_next_editor_loads_it_whole(
    places: Places, tmp_path: Path, workspace: Path
) -> None:
    editor = flags(tmp_path, Scenario([("go", [Step(text=LONG)])]))
    a = places.editor(*editor)
    (pid,) = places.pids()
    session_id = new_session(a, workspace)
    prompt(a, session_id, "go")
    read_until(a, lambda: len(texts(updates(a)).get(AGENT, "")) > 20, "the turn streams")
    assert isinstance(a.ws, RelayLine)
    os.kill(a.ws.process.process.pid, signal.SIGKILL)
    assert a.ws.process.wait() == -signal.SIGKILL

    c = places.editor(*editor)
    assert places.pids() == [pid]
    wait_until(lambda: "turn/end" in log_types(c, session_id), "the turn ends")
    ended = [e["data"]["reason"] for e in c.events(session_id) if e["type"] == "turn/end"]
    assert ended == [{"kind": "completed"}]
    assert loaded_texts(c, session_id, workspace) == {USER: "go", AGENT: LONG}


def test_an_editor_following_the_list_sees_anothers_session_created_titled_run_and_idle(
    places: Places, tmp_path: Path, workspace: Path
) -> None:
    editor = (*flags(tmp_path, Scenario([("go", [Step(text=LONG)])])), "--titles", "off")
    a, b = places.editor(*editor), places.editor(*editor)
    subscription = b.request("session.list.follow", {})
    session_id = new_session(a, workspace)
    read_until(b, lambda: len(listed(b, session_id)) == 1, "B is told of the new session")
    a.request("session/set_title", {"sessionId": session_id, "title": "Plan"})
    read_until(b, lambda: listed(b, session_id)[-1][1] == "Plan", "B is told of the title")
    prompted = prompt(a, session_id, "go")
    read_until(b, lambda: listed(b, session_id)[-1][2] is True, "B is told it runs")
    assert a.answer(prompted) == {"stopReason": "end_turn"}
    read_until(b, lambda: listed(b, session_id)[-1][2] is False, "B is told it is idle")

    assert subscription["sessions"] == []
    assert listed(b, session_id) == [
        ("created", None, False),
        ("updated", "Plan", False),
        ("updated", "Plan", True),
        ("updated", "Plan", False),
    ]
    changes = [n["params"] for n in b.notifications if n["method"] == "session.listChanged"]
    assert {c["subscriptionId"] for c in changes} == {subscription["subscriptionId"]}


def listed(peer: Peer, session_id: str) -> list[tuple[str, str | None, bool]]:
    """The `session.listChanged` of the session `peer` was sent, as (change, title, running),
    a repeat of the one before (a new last-activity time alone) left out."""
    seen: list[tuple[str, str | None, bool]] = []
    for n in peer.notifications:
        session = n["params"]["session"] if n["method"] == "session.listChanged" else {}
        if session.get("sessionId") == session_id:
            now = (n["params"]["change"], session.get("title"), session["running"])
            if not seen or seen[-1] != now:
                seen.append(now)
    return seen


def test_an_editor_searches_the_text_of_a_turn_another_editor_ran(
    places: Places, tmp_path: Path, workspace: Path
) -> None:
    editor = flags(tmp_path, Scenario([("go", [Step(text="The port is 8123.")])]))
    a, b = places.editor(*editor), places.editor(*editor)
    session_id = new_session(a, workspace)
    assert a.answer(prompt(a, session_id, "go")) == {"stopReason": "end_turn"}

    address = {"kind": "session", "sessionId": session_id}
    found = b.request("session.search", {"address": address, "query": "8123"})
    (reply,) = [e["seq"] for e in b.events(session_id) if e["type"] == "assistant/message"]
    assert found == {
        "hits": [{"seq": reply, "kind": "agent_message", "snippet": "The port is 8123."}],
        "hasMore": False,
    }
