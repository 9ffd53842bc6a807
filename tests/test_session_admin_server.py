"""`session/set_title`, `session/status`, `session/archive` and `session/unarchive` through the
real server: the capabilities advertised, each answer (checked against the SDK 2.4.0 schema,
as every frame is by `PromptServer`), and what `session/list` and `session/load` show after."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_builder import Scenario, Step
from prompt_harness import PromptServer

pytestmark = pytest.mark.process

HELLO = Scenario([("Hello?", [Step(text="Hello there.")])])


def listed(server: PromptServer, **params: object) -> list[tuple[str, bool, str | None]]:
    """(id, archived, title) of each session `session/list` gives, normalized."""
    sessions = server.request("session/list", params).result["sessions"]
    return [(server.normalize(s["sessionId"]), s["archived"], s.get("title")) for s in sessions]


def test_initialize_advertises_title_status_and_archive(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        capabilities = server.request("initialize", {"protocolVersion": 1}).result[
            "agentCapabilities"
        ]["sessionCapabilities"]
    assert (capabilities["title"], capabilities["status"], capabilities["archive"]) == ({}, {}, {})


def test_a_title_set_on_a_closed_session_is_listed_and_replayed_by_a_load(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session = server.new_session()
        server.prompt(session, "Hello?")
        server.request("session/close", {"sessionId": session})
        answer = server.request("session/set_title", {"sessionId": session, "title": " Greeting "})
        titles = listed(server)
        loaded = server.request(
            "session/load", {"sessionId": session, "cwd": str(server.workspace), "mcpServers": []}
        )
        log = server.log(session)
    assert (answer.result, answer.updates, titles) == (
        {"title": "Greeting"},
        [],
        [("<session>", False, "Greeting")],
    )
    assert [u for u in loaded.updates if u["sessionUpdate"] == "session_info_update"] == [
        {"sessionUpdate": "session_info_update", "title": "Greeting"}
    ]
    assert log[-1] == {"type": "session/title", "data": {"title": "Greeting"}}


def test_a_title_set_on_a_session_open_here_is_shown_to_its_client(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session = server.new_session()
        answer = server.request("session/set_title", {"sessionId": session, "title": "Mine"})
    assert answer.updates == [{"sessionUpdate": "session_info_update", "title": "Mine"}]


def test_an_empty_title_is_refused_naming_the_title(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session = server.new_session()
        error = server.request("session/set_title", {"sessionId": session, "title": "  "}).error
    assert (error["code"], error["data"]) == (-32602, {"path": "$.title"})


def test_status_is_open_while_live_and_saved_once_closed_and_unknown_otherwise(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session = server.new_session()
        live = server.request("session/status", {"sessionId": session}).result
        server.request("session/close", {"sessionId": session})
        saved = server.request("session/status", {"sessionId": session}).result
        unknown = server.request("session/status", {"sessionId": "nobody"}).error
    assert (live, saved) == (
        {"status": "open", "_meta": {"acp-server": {"running": False}}},
        {"status": "saved", "_meta": {"acp-server": {"running": False}}},
    )
    assert (unknown["code"], unknown["data"]) == (-32002, {"sessionId": "nobody"})


def test_an_archived_session_is_listed_only_when_asked_for_until_unarchived(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        kept = server.new_session()
        archived = server.new_session()
        assert server.request("session/archive", {"sessionId": archived}).result == {}
        status = server.request("session/status", {"sessionId": archived}).result["status"]
        default = listed(server)
        everything = listed(server, archived="include")
        only = listed(server, archived="only")
        assert server.request("session/unarchive", {"sessionId": archived}).result == {}
        after = listed(server)
        log = server.log(archived)
        server.request("session/close", {"sessionId": kept})
    assert status == "saved"  # archiving closed it
    assert (default, only) == (
        [("<session>", False, None)],
        [("<session-1>", True, None)],
    )
    assert everything == [("<session-1>", True, None), ("<session>", False, None)]
    assert after == [("<session-1>", False, None), ("<session>", False, None)]
    assert log == [
        {"type": "session/archived", "data": {"archived": True}},
        {"type": "session/archived", "data": {"archived": False}},
    ]
    assert kept != archived


def test_an_unsupported_archive_filter_is_invalid_params(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        error = server.request("session/list", {"archived": "_mine"}).error
    assert (error["code"], error["data"]) == (-32602, {"path": "$.archived"})


def test_a_page_shows_the_title_and_archive_events_in_their_place(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session = server.new_session()
        server.prompt(session, "Hello?")
        server.request("session/set_title", {"sessionId": session, "title": "Kept"})
        server.request("session/archive", {"sessionId": session})
        last = len(server.log(session)) - 1
        address = {"kind": "session", "sessionId": session}
        page = server.request("session.page", {"address": address, "throughSeq": last}).result
    events = [r["event"] for r in page["records"] if "event" in r]
    assert [(e["type"], e["data"]) for e in events[-3:]] == [
        ("turn/end", {"turn": 0, "reason": {"kind": "completed"}}),
        ("session/title", {"title": "Kept"}),
        ("session/archived", {"archived": True}),
    ]
