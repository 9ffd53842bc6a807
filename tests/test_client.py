"""The client half (SPEC 3.3) against the real server: `AcpClient` over a spawned process.

Every test drives `python -m acp_server serve` through `AcpClient` and checks the journal it
builds, from pages or from a follow, against the session's log on disk: the same events,
exactly.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures_builder import Scenario, Step, ToolUse, args, write_fixture
from polling import TIMEOUT, wait_until
from surface_values import session_setup

from acp_server.client import (
    AcpClient,
    ConnectionClosed,
    Follow,
    Journal,
    RpcError,
    session_address,
    subagent_address,
)
from acp_server.client.connection import STDERR_TAIL_BYTES
from acp_server.core.content import TextContent
from acp_server.core.events import (
    SessionEvent,
    SubagentStart,
    TurnEnd,
    TurnEndData,
    TurnEndReasonInterrupted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.storage.jsonl.log import read_log
from acp_server.storage.jsonl.sessions import SessionStore

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def long_text(words: int) -> str:
    """Prose of `words` words (about 2 chunks a word once cut into fragments)."""
    vocabulary = ["journal", "gapless", " ", "über", "seq", "page", "row", "naïve", "日本"]
    return " ".join(vocabulary[k % len(vocabulary)] + str(k % 7) for k in range(words))


def log_events(sessions: Path, session_id: str) -> list[SessionEvent]:
    return read_log(sessions / session_id / "session.jsonl").events


def spawn(
    tmp_path: Path, scenario: Scenario, *flags: str, env: dict[str, str] | None = None
) -> Any:
    fixture = write_fixture(tmp_path / "fixture", scenario)
    # Titles off: the followers here end at the turn's end, and the logs they are held to
    # are the turns'.
    return AcpClient.spawn(
        "--replay", str(fixture), "--titles", "off", *flags,
        sessions_dir=tmp_path / "sessions", env=env,
    )  # fmt: skip


async def new_session(client: AcpClient, tmp_path: Path) -> str:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    await client.initialize()
    return await client.new_session(workspace)


async def until_turn_end(follow: Follow, sleep: float = 0.0) -> list[SessionEvent]:
    """Iterate the follow (sleeping `sleep` after each event) until its journal holds a
    `turn/end`; the events iterated."""
    seen: list[SessionEvent] = []
    if any(type(e) is TurnEnd for e in follow.journal.events):
        return seen
    async for event in follow:
        seen.append(event)
        if type(event) is TurnEnd:
            break
        await anyio.sleep(sleep)
    return seen


async def until_seq(follow: Follow, seq: int) -> AsyncIterator[SessionEvent]:
    """The follow's new events through `seq`."""
    if follow.journal.last_seq >= seq:
        return
    async for event in follow:
        yield event
        if event.seq == seq:
            return


async def next_event_of_type(follow: Follow, kind: type[Any]) -> Any:
    async for event in follow:
        if type(event) is kind:
            return event
    raise AssertionError(f"the follow ended before a {kind.__name__}")


TWO_TURNS = Scenario(
    [
        (
            "plan it",
            [
                Step(
                    reasoning="Two things to do.",
                    text="Planning.",
                    calls=[
                        ToolUse(
                            "call_1",
                            "todo_write",
                            args(todos=[{"content": "Write", "status": "pending"}]),
                        )
                    ],
                ),
                Step(text="Planned: " + long_text(40)),
            ],
        ),
        ("again", [Step(text="Second answer.", usage=(3, 4))]),
    ]
)


async def test_a_page_walk_of_a_prompted_session_equals_its_log_on_disk(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, TWO_TURNS) as client:
            session = await new_session(client, tmp_path)
            assert await client.prompt(session, "plan it") == "end_turn"
            assert await client.prompt(session, "again") == "end_turn"

            journal = await client.history(session_address(session), max_messages=1)

    assert list(journal.events) == log_events(tmp_path / "sessions", session)
    assert (journal.first_seq, journal.has_older) == (0, False)


async def test_a_history_walk_through_a_given_seq_holds_exactly_the_events_through_it(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, TWO_TURNS) as client:
            session = await new_session(client, tmp_path)
            await client.prompt(session, "plan it")
            await client.prompt(session, "again")

            journal = await client.history(session_address(session), max_messages=2, through_seq=20)

    assert list(journal.events) == log_events(tmp_path / "sessions", session)[:21]


async def test_a_tail_load_in_a_new_process_and_a_history_walk_before_it_give_the_whole_log(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, TWO_TURNS) as client:
            session = await new_session(client, tmp_path)
            await client.prompt(session, "plan it")
            await client.prompt(session, "again")
        log = log_events(tmp_path / "sessions", session)
        second_turn = [e.seq for e in log if type(e) is TurnStart][1]
        async with spawn(tmp_path, TWO_TURNS) as client:
            await client.initialize()
            loaded = await client.load_session(session, tmp_path / "workspace", max_messages=1)
            older = await client.history(
                session_address(session), max_messages=1, through_seq=second_turn - 1
            )

    assert loaded.response == {
        **session_setup(),
        "_meta": {"acp-server": {"replayedFromSeq": second_turn, "hasMore": True}},
    }
    assert [u["sessionUpdate"] for u in loaded.updates] == [
        "user_message_chunk",
        "agent_message_chunk",
        # then the session's setup (SPEC 4.4)
        "current_mode_update",
        "config_option_update",
        "available_commands_update",
    ]
    assert list(older.events) == log[:second_turn]


async def test_a_page_past_the_last_seq_is_an_rpc_error_naming_the_field(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, TWO_TURNS) as client:
            session = await new_session(client, tmp_path)
            with pytest.raises(RpcError) as raised:
                await client.page(session_address(session), through_seq=5)

    assert raised.value.code == -32602
    assert "throughSeq" in raised.value.message


async def test_following_an_unknown_session_is_an_rpc_error(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, TWO_TURNS) as client:
            await client.initialize()
            with pytest.raises(RpcError) as raised:
                await client.follow(session_address("no-such-session"))

    assert raised.value.code == -32002


async def test_a_slow_follower_of_a_streaming_prompt_ends_with_exactly_the_log(
    tmp_path: Path,
) -> None:
    streaming = Scenario([("stream", [Step(text=long_text(1500))])])  # about 3,000 chunks
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, streaming, "--pace-ms", "1") as client:
            session = await new_session(client, tmp_path)
            follow = await client.follow(session_address(session))
            updates: list[Any] = []
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.prompt, session, "stream", updates.append)
                seen = await until_turn_end(follow, sleep=0.0005)
            await follow.aclose()

    log = log_events(tmp_path / "sessions", session)
    assert len(updates) > 2500
    assert follow.overflows == []
    assert seen == log  # the follow began on the empty session: every event came live
    assert list(follow.journal.events) == log


async def test_a_follower_ended_by_an_overflow_recovers_by_paging_to_exactly_the_log(
    tmp_path: Path,
) -> None:
    # Short tool steps first, so that the events missed in an overflow span several messages
    # and the new snapshot (one message) does not reach back: the follow must page.
    steps = [
        Step(
            text=f"Step {k}.",
            calls=[
                ToolUse(
                    f"c{k}",
                    "todo_write",
                    args(todos=[{"content": f"item {k}", "status": "pending"}]),
                )
            ],
        )
        for k in range(12)
    ]
    # The whole turn's output must fit in the pipe and the server's output queue while the
    # client reads nothing (each sync awaits the store's worker thread, so a turn's frames
    # leave in more batches than when fsyncs ran on the event loop): a short stream.
    streaming = Scenario([("stream", [*steps, Step(text=long_text(150))])])
    paused = False

    def turn_logged() -> bool:
        return any(type(e) is TurnEnd for e in log_events(tmp_path / "sessions", session))

    async def slow_ui(update: Any) -> None:
        # A UI that stalls once while rendering holds the client's reader back until the server
        # has finished the turn: its output backs up and its 2-event buffer for this follower
        # overflows.
        nonlocal paused
        if not paused:
            paused = True
            await anyio.to_thread.run_sync(wait_until, turn_logged, "the turn is logged", 30.0)

    with anyio.fail_after(TIMEOUT):
        async with spawn(
            tmp_path, streaming, "--pace-ms", "1", env={"ACP_SERVER_FOLLOW_BUFFER": "2"}
        ) as client:
            session = await new_session(client, tmp_path)
            follow = await client.follow(session_address(session), max_messages=1)
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.prompt, session, "stream", slow_ui)
                seen = await until_turn_end(follow)
            await follow.aclose()

    log = log_events(tmp_path / "sessions", session)
    assert len(follow.overflows) >= 1
    assert seen == log
    assert list(follow.journal.events) == log


async def test_a_follower_of_a_cold_session_gets_the_events_recovery_appends_on_load_with_no_gap(
    tmp_path: Path,
) -> None:
    # A log left by a process that died mid-turn: turn/start and user/message, no turn/end.
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    header = SessionHeader(
        version=SESSION_FORMAT_VERSION, id="crashed", created_at=0, cwd=str(workspace)
    )
    writer = SessionStore(tmp_path / "sessions").create(header)
    writer.append(
        [
            TurnStart(0, 1, TurnStartData(0)),
            UserMessageEvent(1, 2, UserMessageData(0, UserMessage("u0", [TextContent("hi")]))),
        ]
    )
    writer.close()
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, Scenario([("again", [Step(text="Back again.")])])) as client:
            await client.initialize()
            follow = await client.follow(session_address("crashed"))
            await client.load_session("crashed", workspace)  # recovery appends turn/end at seq 2
            await client.prompt("crashed", "again")
            seen = [
                event
                async for event in until_seq(
                    follow, len(log_events(tmp_path / "sessions", "crashed")) - 1
                )
            ]
            await follow.aclose()

    log = log_events(tmp_path / "sessions", "crashed")
    assert log[2] == TurnEnd(2, log[2].time, TurnEndData(0, TurnEndReasonInterrupted()))
    assert seen == log[2:]
    assert follow.repaired == []  # every event came live, in order


async def test_a_subagent_child_followed_while_its_parent_runs_ends_with_exactly_its_log(
    tmp_path: Path,
) -> None:
    scenario = Scenario(
        [
            (
                "delegate",
                [
                    Step(calls=[ToolUse("call_task", "task", args(prompt="Summarize"))]),
                    Step(text="The child is done."),
                ],
            )
        ],
        children=[[("Summarize", [Step(reasoning="Short.", text=long_text(400))])]],
    )
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, scenario, "--pace-ms", "1") as client:
            session = await new_session(client, tmp_path)
            parent = await client.follow(session_address(session))
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.prompt, session, "delegate")
                start = await next_event_of_type(parent, SubagentStart)
                child_id = start.data.child_session_id
                child = await client.follow(subagent_address(session, child_id), max_messages=1)
                child_cursor = child.journal.last_seq
                await until_turn_end(child)
                while await child.load_older():
                    pass
                await until_turn_end(parent)
            await child.aclose()
            await parent.aclose()

    child_log = log_events(tmp_path / "sessions", child_id)
    assert child_cursor < len(child_log) - 100  # it was followed live, not read when done
    assert list(child.journal.events) == child_log
    assert list(parent.journal.events) == log_events(tmp_path / "sessions", session)


async def test_a_page_without_through_seq_pages_on_through_the_seq_it_answered(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, TWO_TURNS) as client:
            session = await new_session(client, tmp_path)
            await client.prompt(session, "plan it")
            address = session_address(session)
            newest = await client.page(address, max_messages=1)
            await client.prompt(session, "again")  # appends after the first page was cut
            journal = Journal.from_page(newest.records, newest.has_more)
            while journal.has_older:
                page = await client.page(
                    address, newest.through_seq, before_seq=journal.first_seq, max_messages=1
                )
                journal.prepend(page.records, page.has_more)

    log = log_events(tmp_path / "sessions", session)
    second_turn = [e.seq for e in log if type(e) is TurnStart][1]
    assert newest.through_seq == second_turn - 1
    assert list(journal.events) == log[:second_turn]


async def test_a_journal_from_history_equals_one_from_walking_pages_by_hand(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, TWO_TURNS) as client:
            session = await new_session(client, tmp_path)
            await client.prompt(session, "plan it")
            address = session_address(session)
            last = len(log_events(tmp_path / "sessions", session)) - 1
            page = await client.page(address, last, max_messages=1)
            journal = Journal.from_page(page.records, page.has_more)
            while journal.has_older:
                page = await client.page(
                    address, last, before_seq=journal.first_seq, max_messages=1
                )
                journal.prepend(page.records, page.has_more)
            walked = await client.history(address, max_messages=3)

    assert list(journal.events) == list(walked.events) == log_events(tmp_path / "sessions", session)


# ---------------------------------------------------------------------------------------------
# The connection itself, against tiny stand-in servers.

ANSWER_AFTER_STDERR = """
import json, sys
sys.stderr.write("x" * (4 << 20))  # blocks unless the client drains stderr
sys.stderr.flush()
request = json.loads(sys.stdin.readline())
print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": True}}), flush=True)
sys.stdin.read()
"""

ASK_THE_CLIENT = """
import json, sys
def send(message): print(json.dumps(message), flush=True)
request = json.loads(sys.stdin.readline())
send({"jsonrpc": "2.0", "id": "p", "method": "session/request_permission", "params": {"sessionId": "s",
      "toolCall": {}, "options": [{"optionId": "yes-once", "name": "Allow", "kind": "allow_once"}]}})
send({"jsonrpc": "2.0", "id": "f", "method": "fs/read_text_file", "params": {"sessionId": "s", "path": "/x"}})
replies = sorted((json.loads(sys.stdin.readline()) for _ in range(2)), key=lambda reply: reply["id"])
send({"jsonrpc": "2.0", "id": request["id"], "result": replies})
sys.stdin.read()
"""


async def test_a_server_writing_megabytes_to_stderr_is_never_blocked_by_the_client() -> None:
    with anyio.fail_after(TIMEOUT):
        async with AcpClient.spawn(argv=[sys.executable, "-c", ANSWER_AFTER_STDERR]) as client:
            assert await client.request("ping") == {"ok": True}
    assert client.stderr == "x" * STDERR_TAIL_BYTES
    assert client.process.returncode == 0


async def test_the_servers_requests_get_the_default_answers() -> None:
    with anyio.fail_after(TIMEOUT):
        async with AcpClient.spawn(argv=[sys.executable, "-c", ASK_THE_CLIENT]) as client:
            replies = await client.request("go")
    assert replies == [
        {
            "jsonrpc": "2.0",
            "id": "f",
            "error": {"code": -32601, "message": "Method not found: fs/read_text_file"},
        },
        {
            "jsonrpc": "2.0",
            "id": "p",
            "result": {"outcome": {"outcome": "selected", "optionId": "yes-once"}},
        },
    ]


async def test_a_request_pending_when_the_server_exits_raises_connection_closed() -> None:
    with anyio.fail_after(TIMEOUT):
        async with AcpClient.spawn(
            argv=[sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit(3)"]
        ) as client:
            with pytest.raises(
                ConnectionClosed, match="initialize: the server's output ended before its answer"
            ):
                await client.initialize()
    assert client.process.returncode == 3
