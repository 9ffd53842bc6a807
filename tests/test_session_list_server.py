"""The live session list (SPEC 3.5) through the real server: `session.list.follow` answers the
sessions, then `session.listChanged` tells each change once (created, title, running and idle,
archived, deleted), those another process writes to the store too, until
`session.list.unfollow`. Each session shown is ACP's `SessionInfo` plus `running`."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import schema
from acp_models import exact
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step, ToolUse, args, write_fixture
from ws_server import listening

pytestmark = pytest.mark.process

Frames = list[dict[str, Any]]

WRITE = ToolUse("call_write", "write_file", args(path="notes.txt", content="x"))
ONE_WRITE = Scenario([("go", [Step(calls=[WRITE]), Step(text="Done.")])])


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/sessions.db"
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "sessions")


def read_until(server: AcpProcess, done: Callable[[Frames], bool]) -> Frames:
    """Frames read until `done(frames)` holds."""
    frames: Frames = []
    while not done(frames):
        frames.append(server.read_frame())
    return frames


def told(frames: Frames, subscription_id: str) -> list[dict[str, Any]]:
    """The `session.listChanged` params of one subscription, each checked to be ACP's
    `SessionInfo` plus `running`."""
    changes = [
        f["params"]
        for f in frames
        if f.get("method") == "session.listChanged"
        and f["params"]["subscriptionId"] == subscription_id
    ]
    for change in changes:
        session = dict(change["session"])
        assert type(session.pop("running")) is bool
        exact(schema.SessionInfo, session, "a followed session")
    return changes


def answered(request_id: Any) -> Callable[[Frames], bool]:
    return lambda frames: any(f.get("id") == request_id and "method" not in f for f in frames)


def both(*conditions: Callable[[Frames], bool]) -> Callable[[Frames], bool]:
    return lambda frames: all(condition(frames) for condition in conditions)


def shown(subscription_id: str, session_id: str, **fields: Any) -> Callable[[Frames], bool]:
    """A change of the session whose payload holds `fields` (`change` among them) arrived."""

    def seen(frames: Frames) -> bool:
        for params in told(frames, subscription_id):
            session = params["session"]
            values = {"change": params["change"], **session}
            if session["sessionId"] == session_id and all(
                values.get(k) == v for k, v in fields.items()
            ):
                return True
        return False

    return seen


def latest(
    subscription_id: str, session_id: str, before: Frames, **fields: Any
) -> Callable[[Frames], bool]:
    """The session's newest change so far (frames read before and now) holds `fields`."""

    def seen(frames: Frames) -> bool:
        mine = [
            params["session"]
            for params in told(before + frames, subscription_id)
            if params["session"]["sessionId"] == session_id
        ]
        return bool(mine) and all(mine[-1].get(k) == v for k, v in fields.items())

    return seen


def step(
    server: AcpProcess, method: str, params: Any, until: Callable[[Frames], bool] | None = None
) -> Frames:
    """Send a request; the frames read until its answer (and until `until` holds)."""
    request_id = server.send_request(method, params)
    done = answered(request_id)
    return read_until(server, done if until is None else both(done, until))


def projected(changes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each change as (change, title, running, archived), a repeat of the one before (a new
    last-activity time alone) left out."""
    seen: list[tuple[Any, ...]] = []
    for params in changes:
        session = params["session"]
        now = (params["change"], session.get("title"), session["running"], session["archived"])
        if not seen or seen[-1] != now:
            seen.append(now)
    return seen


def test_each_change_of_a_session_reaches_a_follower_once(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    fixture = write_fixture(tmp_path / "fixture", ONE_WRITE)
    with AcpProcess(tmp_path / "sessions", "--replay", str(fixture), "--titles", "off") as server:
        server.initialize()
        follow = server.result("session.list.follow", {})
        assert follow["sessions"] == []
        sub = follow["subscriptionId"]
        frames: Frames = []
        new_id = server.send_request("session/new", {"cwd": str(workspace), "mcpServers": []})
        frames += read_until(server, answered(new_id))
        session_id = next(f for f in frames if f.get("id") == new_id)["result"]["sessionId"]
        frames += read_until(server, shown(sub, session_id, change="created"))
        frames += step(
            server,
            "session/set_title",
            {"sessionId": session_id, "title": "Plan"},
            shown(sub, session_id, title="Plan"),
        )
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
        prompt_id = server.send_request("session/prompt", prompt)

        def asked(frames: Frames) -> bool:
            return any(f.get("method") == "session/request_permission" for f in frames)

        # The turn waits for the permission's answer: the list says it runs meanwhile.
        frames += read_until(server, both(asked, shown(sub, session_id, running=True)))
        permission = next(f for f in frames if f.get("method") == "session/request_permission")
        server.send(
            {
                "jsonrpc": "2.0",
                "id": permission["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
            }
        )
        # Idle again once the turn is over (the last change of the session says so).
        frames += read_until(
            server, both(answered(prompt_id), latest(sub, session_id, frames, running=False))
        )
        frames += step(
            server,
            "session/archive",
            {"sessionId": session_id},
            shown(sub, session_id, change="deleted", archived=True),
        )
        frames += step(
            server,
            "session/unarchive",
            {"sessionId": session_id},
            shown(sub, session_id, change="created", archived=False),
        )
        frames += step(
            server,
            "session/delete",
            {"sessionId": session_id},
            shown(sub, session_id, change="deleted", archived=False),
        )
        assert server.finish() == 0
    changes = told(frames, sub)
    assert projected(changes) == [
        ("created", None, False, False),
        ("updated", "Plan", False, False),
        ("updated", "Plan", True, False),
        ("updated", "Plan", False, False),
        ("deleted", "Plan", False, True),
        ("created", "Plan", False, False),
        ("deleted", "Plan", False, False),
    ]
    running = [c["session"]["_meta"]["acp-server"] for c in changes if c["session"]["running"]]
    assert {m.get("turn") for m in running} == {0}
    # Nothing is told twice: a change is only sent when what the list shows changed.
    payloads = [(c["change"], c["session"]) for c in changes]
    assert all(a != b for a, b in itertools.pairwise(payloads))


def test_a_follow_answers_the_sessions_its_filter_keeps_newest_first(tmp_path: Path) -> None:
    workspace, elsewhere = tmp_path / "workspace", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    with AcpProcess(tmp_path / "sessions") as server:
        server.initialize()
        ids = [
            server.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
            for cwd in (workspace, elsewhere, workspace)
        ]
        server.result("session/archive", {"sessionId": ids[2]})
        kept = server.result("session.list.follow", {"cwd": str(workspace)})["sessions"]
        every = server.result("session.list.follow", {"includeArchived": True})["sessions"]
        assert server.finish() == 0
    assert [s["sessionId"] for s in kept] == [ids[0]]
    assert [(s["sessionId"], s["archived"]) for s in every] == [
        (ids[2], True),
        (ids[1], False),
        (ids[0], False),
    ]


def test_a_change_another_process_writes_reaches_a_follower(store_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with AcpProcess(None, "--store", store_url) as follower:
        follower.initialize()
        sub = follower.result("session.list.follow", {})["subscriptionId"]
        with AcpProcess(None, "--store", store_url) as writer:
            writer.initialize()
            new = writer.result("session/new", {"cwd": str(workspace), "mcpServers": []})
            session_id = new["sessionId"]
            frames = read_until(follower, shown(sub, session_id, change="created"))
            step(writer, "session/set_title", {"sessionId": session_id, "title": "Far"})
            frames += read_until(follower, shown(sub, session_id, change="updated", title="Far"))
            writer.result("session/delete", {"sessionId": session_id})
            frames += read_until(follower, shown(sub, session_id, change="deleted"))
            assert writer.finish() == 0
        assert follower.finish() == 0
    assert [c["change"] for c in told(frames, sub)] == ["created", "updated", "deleted"]


def test_after_unfollow_a_subscription_is_told_nothing_and_is_unknown(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with AcpProcess(tmp_path / "sessions") as server:
        server.initialize()
        gone = server.result("session.list.follow", {})["subscriptionId"]
        kept = server.result("session.list.follow", {})["subscriptionId"]
        assert server.result("session.list.unfollow", {"subscriptionId": gone}) == {}
        new_id = server.send_request("session/new", {"cwd": str(workspace), "mcpServers": []})
        frames = read_until(server, answered(new_id))
        session_id = frames[-1]["result"]["sessionId"]
        frames += read_until(server, shown(kept, session_id, change="created"))
        error = server.error("session.list.unfollow", {"subscriptionId": gone})
        assert server.finish() == 0
    assert told(frames, gone) == []
    assert error["code"] == -32602
    assert error["data"] == {"path": "$.subscriptionId"}
    assert gone in error["message"]


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"cwd": "relative/dir"}, "$.cwd"),
        ({"includeArchived": "yes"}, "$.includeArchived"),
        ({"cwd": 3}, "$.cwd"),
    ],
)
def test_malformed_follow_params_are_invalid_params_naming_the_field(
    tmp_path: Path, params: dict[str, Any], path: str
) -> None:
    with AcpProcess(tmp_path / "sessions") as server:
        server.initialize()
        error = server.error("session.list.follow", params)
        assert server.finish() == 0
    assert error["code"] == -32602
    assert error["data"]["path"] == path


def test_over_websocket_a_follower_sees_another_connections_session_and_searches_it(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with listening(tmp_path / "sessions") as server:
        browser, editor = server.connect(), server.connect()
        browser.initialize()
        editor.initialize()
        sub = browser.request("session.list.follow", {})["subscriptionId"]
        session_id = editor.new_session(workspace)
        editor.prompt_demo(session_id)

        def mine() -> list[dict[str, Any]]:
            return [
                n["params"]
                for n in browser.notifications
                if n["method"] == "session.listChanged"
                and n["params"]["session"]["sessionId"] == session_id
            ]

        # The turn is over: the list says so, once the browser has read that far.
        while not (mine() and mine()[-1]["session"]["running"] is False and len(mine()) > 1):
            browser.frame()
        found = browser.request(
            "session.search",
            {"address": {"kind": "session", "sessionId": session_id}, "query": "hello.py"},
        )
    assert mine()[0]["change"] == "created"
    assert {c["subscriptionId"] for c in mine()} == {sub}
    assert found["hits"][-1] == {
        "seq": 1,
        "kind": "user_message",
        "snippet": 'The greeting in hello.py is wrong: it should say "Hello, world!". Can you fix '
        "it, and keep a short plan as you go?",
    }
