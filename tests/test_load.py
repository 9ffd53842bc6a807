"""`session/load` across real processes (SPEC 2.4, 2.5, 4.2 and 5).

A first `acp-server` process records a session (it prompts and exits, or it is killed with
SIGKILL in the middle of a turn); a fresh process over the same sessions root loads it. The
replay is compared with what the first process streamed, reduced to its completed content
(`completed`): the text and thought fragments of one message joined into one chunk, the
`in_progress` tool updates dropped. Every frame a server writes is validated against the
official ACP models (`agent-client-protocol`) and must dump back to exactly what was sent.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec
import pytest
from acp import schema
from acp_models import AGENT_RESULTS, TO_CLIENT_PARAMS, exact
from acp_process import AcpProcess, assert_jsonrpc_frame
from fixtures_builder import Scenario, Step, ToolUse, args, fragments, step_chunks, write_fixture
from polling import TIMEOUT, wait_until
from surface_values import session_setup

from acp_server.core.header import SESSION_FORMAT_VERSION
from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

# ---------------------------------------------------------------------------------------------
# Helpers: a place on disk, a server process, the expected replay.


@dataclass(frozen=True)
class Place:
    """A fixture, a workspace (every session's cwd) and a sessions root."""

    fixture: Path
    workspace: Path
    sessions: Path

    def log_path(self, session_id: str) -> Path:
        return self.sessions / session_id / "session.jsonl"

    def copy(self, tmp_path: Path) -> Place:
        """The same fixture and workspace over a private copy of the sessions root."""
        sessions = tmp_path / "sessions"
        shutil.copytree(self.sessions, sessions)
        return replace(self, sessions=sessions)


def make_place(root: Path, scenario: Scenario) -> Place:
    root = root.resolve()
    workspace = root / "workspace"
    workspace.mkdir()
    return Place(write_fixture(root / "fixture", scenario), workspace, root / "sessions")


@dataclass
class Reply:
    """A request's response and every frame the server sent before it, in wire order."""

    response: dict[str, Any]
    frames: list[dict[str, Any]]

    @property
    def result(self) -> Any:
        assert "result" in self.response, f"expected a result, got {self.response}"
        return self.response["result"]

    @property
    def error(self) -> Any:
        assert "error" in self.response, f"expected an error, got {self.response}"
        return self.response["error"]

    @property
    def updates(self) -> list[dict[str, Any]]:
        """The `update` of each frame, which must all be `session/update` notifications."""
        assert all(f.get("method") == "session/update" and "id" not in f for f in self.frames), (
            self.frames
        )
        return [f["params"]["update"] for f in self.frames]


class Server:
    """One `acp-server serve --replay FIXTURE` process over a place, initialized."""

    def __init__(self, place: Place, *flags: str) -> None:
        self.place = place
        # Titles off: the replays and positions asserted here are the turns' (a title after
        # the first turn is the title tests' concern, and the snapshots load titled sessions).
        self.process = AcpProcess(
            place.sessions, "--replay", str(place.fixture), "--titles", "off", *flags
        )
        self.methods: dict[Any, str] = {}
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def call(self, method: str, params: Any) -> Reply:
        response, frames = self.process.exchange(method, params, timeout=TIMEOUT)
        self.methods[response["id"]] = method
        return Reply(response, frames)

    def new_session(self) -> str:
        return self.call(
            "session/new", {"cwd": str(self.place.workspace), "mcpServers": []}
        ).result["sessionId"]

    def prompt(self, session_id: str, text: str) -> Reply:
        return self.call("session/prompt", prompt_params(session_id, text))

    def start_prompt(self, session_id: str, text: str) -> Any:
        """Send a prompt without waiting for its answer; its request id."""
        request_id = self.process.send_request("session/prompt", prompt_params(session_id, text))
        self.methods[request_id] = "session/prompt"
        return request_id

    def load(self, session_id: str, max_messages: int | None = None) -> Reply:
        params: dict[str, Any] = {
            "sessionId": session_id,
            "cwd": str(self.place.workspace),
            "mcpServers": [],
        }
        if max_messages is not None:
            params["_meta"] = {"acp-server": {"replay": {"maxMessages": max_messages}}}
        return self.call("session/load", params)

    def read_frame(self) -> dict[str, Any]:
        return self.process.read_frame(TIMEOUT)

    def finish(self) -> None:
        """End the input: the server exits 0, without a traceback, having sent valid frames."""
        assert self.process.finish(TIMEOUT) == 0, self.process.stderr
        assert "Traceback" not in self.process.stderr, self.process.stderr
        assert self.process.stdout_tail == b""
        self.check_frames()

    def kill(self) -> None:
        """SIGKILL, then check the frames it had written."""
        self.process.kill()
        self.check_frames()

    def check_frames(self) -> None:
        for line in self.process.stdout_lines:
            frame = assert_jsonrpc_frame(line)
            if "method" in frame:
                exact(TO_CLIENT_PARAMS[frame["method"]], frame["params"], frame["method"])
            elif "error" in frame:
                exact(schema.Error, frame["error"], "an error")
            else:
                method = self.methods[frame["id"]]
                exact(AGENT_RESULTS[method], frame["result"], f"the result of {method}")

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.process.kill()
        self.process.__exit__(None, None, None)


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def completed(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Live updates reduced to what they completed: consecutive text (or thought) fragments of
    one message joined into one chunk, `in_progress` tool updates and the usage figures of each
    model call dropped (a replay shows the conversation, not the meter)."""
    done: list[dict[str, Any]] = []
    for update in updates:
        kind = update["sessionUpdate"]
        last = done[-1] if done else {}
        if kind in ("agent_message_chunk", "agent_thought_chunk") and (
            last.get("sessionUpdate"),
            last.get("messageId"),
        ) == (kind, update["messageId"]):
            joined = last["content"]["text"] + update["content"]["text"]
            done[-1] = {**last, "content": {"type": "text", "text": joined}}
        elif kind == "usage_update" or (
            kind == "tool_call_update" and update.get("status") == "in_progress"
        ):
            continue
        else:
            done.append(update)
    return done


def user_chunk(text: str, turn: int) -> dict[str, Any]:
    return {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": text},
        "messageId": f"user-{turn}",
    }


def message_chunks(text: str, message_id: str) -> list[dict[str, Any]]:
    """The live `agent_message_chunk`s of a scripted text (cut by `fragments`)."""
    return [
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": t},
            "messageId": message_id,
        }
        for t in fragments(text)
    ]


def logged(path: Path) -> list[dict[str, Any]]:
    """A log's logical events as JSON values."""
    return [msgspec.json.decode(msgspec.json.encode(event)) for event in read_log(path).events]


def without_time(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "time"} for e in events]


def logged_text(path: Path) -> str:
    """The text of every text-delta chunk in a log, joined."""
    return "".join(
        e["data"]["chunk"]["text"]
        for e in logged(path)
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "text-delta"
    )


def wait_for(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, what, TIMEOUT)


def hang(step: Step) -> dict[str, Any]:
    """An override entry that streams `step` up to its last block's end, then hangs."""
    chunks = step_chunks(step)
    assert [c["type"] for c in chunks[-2:]] == ["block-end", "finish"]
    return {"kind": "hang", "chunks": chunks[:-2]}


# ---------------------------------------------------------------------------------------------
# A completed turn, loaded in a fresh process.

FIRST_PROMPT = "The greeting in hello.py is wrong."
FIRST_STEPS = [
    Step(
        reasoning="Read it first.",
        text="Let me look at hello.py.",
        calls=[ToolUse("call_read", "read_file", args(path="hello.py"))],
    ),
    Step(
        calls=[
            ToolUse(
                "call_plan",
                "todo_write",
                args(todos=[{"content": "Fix the greeting", "status": "in_progress"}]),
            )
        ]
    ),
    Step(text="It prints `Helo world`: the greeting is misspelt.", usage=(40, 12)),
]
SECOND_PROMPT = "Thanks. Anything else?"
SECOND_TEXT = "No, that was the only problem."


@dataclass(frozen=True)
class Recorded:
    place: Place
    session_id: str
    live: list[dict[str, Any]]
    """The updates the first process streamed for the first prompt."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """A two-turn fixture of which a first process plays the first turn, then exits."""
    scenario = Scenario([(FIRST_PROMPT, FIRST_STEPS), (SECOND_PROMPT, [Step(text=SECOND_TEXT)])])
    place = make_place(tmp_path_factory.mktemp("recorded"), scenario)
    (place.workspace / "hello.py").write_text('print("Helo world")\n')
    with Server(place) as first:
        session_id = first.new_session()
        answered = first.prompt(session_id, FIRST_PROMPT)
        assert answered.result == {"stopReason": "end_turn"}
    return Recorded(place, session_id, answered.updates)


def test_a_fresh_process_replays_the_completed_content_the_first_one_streamed(
    recorded: Recorded, tmp_path: Path
) -> None:
    with Server(recorded.place.copy(tmp_path)) as second:
        loaded = second.load(recorded.session_id)

        assert loaded.result == session_setup()
        assert loaded.updates == [user_chunk(FIRST_PROMPT, 0), *completed(recorded.live)]
        assert all(f["params"]["sessionId"] == recorded.session_id for f in loaded.frames)


def test_the_replay_shows_each_message_whole_and_each_tool_call_with_its_result(
    recorded: Recorded, tmp_path: Path
) -> None:
    with Server(recorded.place.copy(tmp_path)) as second:
        replayed = second.load(recorded.session_id).updates

    live = recorded.live
    texts: dict[tuple[str, str], str] = {}
    for update in live:
        if update["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk"):
            key = (update["sessionUpdate"], update["messageId"])
            texts[key] = texts.get(key, "") + update["content"]["text"]
    assert (
        {
            (u["sessionUpdate"], u["messageId"]): u["content"]["text"]
            for u in replayed
            if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")
        }
        == texts
        == {
            ("agent_thought_chunk", "assistant-0-0"): "Read it first.",
            ("agent_message_chunk", "assistant-0-0"): "Let me look at hello.py.",
            (
                "agent_message_chunk",
                "assistant-0-2",
            ): "It prints `Helo world`: the greeting is misspelt.",
        }
    )
    tools = ("tool_call", "tool_call_update")
    final = [u for u in live if u["sessionUpdate"] in tools and u.get("status") != "in_progress"]
    assert [u for u in replayed if u["sessionUpdate"] in tools] == final
    assert [(u["sessionUpdate"], u["toolCallId"], u["status"]) for u in final] == [
        ("tool_call", "call_read", "pending"),
        ("tool_call_update", "call_read", "completed"),
        ("tool_call", "call_plan", "pending"),
        ("tool_call_update", "call_plan", "completed"),
    ]


def test_every_replayed_update_is_on_the_wire_before_the_load_response(
    recorded: Recorded, tmp_path: Path
) -> None:
    with Server(recorded.place.copy(tmp_path)) as second:
        loaded = second.load(recorded.session_id)
        probe = second.call("session/list", {})  # answered after anything the load still sent

    kinds = []
    for line in second.process.stdout_lines:
        frame = json.loads(line)
        kinds.append(
            frame["method"] if "method" in frame else second.methods[frame["id"]] + " response"
        )
    # The replay, then the session's mode, options and commands (SPEC 4.4), then the answer.
    assert kinds == [
        "initialize response",
        *["session/update"] * (len(loaded.frames) + 3),
        "session/load response",
        "session/list response",
    ]
    assert probe.frames == []
    assert len(loaded.frames) == 9
    assert [u["update"]["sessionUpdate"] for u in second.process.setup_updates] == [
        "current_mode_update",
        "config_option_update",
        "available_commands_update",
    ]


def test_a_prompt_after_the_load_continues_at_the_next_script_entry(
    recorded: Recorded, tmp_path: Path
) -> None:
    place = recorded.place.copy(tmp_path)
    with Server(place) as second:
        second.load(recorded.session_id)
        answered = second.prompt(recorded.session_id, SECOND_PROMPT)

        assert answered.result == {"stopReason": "end_turn"}
        assert answered.updates == message_chunks(SECOND_TEXT, "assistant-1-0")
    turn = [
        e
        for e in without_time(logged(place.log_path(recorded.session_id)))
        if e["data"].get("turn") == 1
    ]
    assert [e["type"] for e in turn if e["type"] != "assistant/chunk"] == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    assert turn[-1]["data"] == {"turn": 1, "reason": {"kind": "completed"}}


def test_a_second_load_replays_both_turns_as_they_were_streamed(
    recorded: Recorded, tmp_path: Path
) -> None:
    place = recorded.place.copy(tmp_path)
    with Server(place) as second:
        second.load(recorded.session_id)
        live = second.prompt(recorded.session_id, SECOND_PROMPT).updates
    with Server(place) as third:
        replayed = third.load(recorded.session_id).updates

    assert replayed == [
        user_chunk(FIRST_PROMPT, 0),
        *completed(recorded.live),
        user_chunk(SECOND_PROMPT, 1),
        *completed(live),
    ]


def test_a_session_another_process_created_without_a_turn_loads_empty_and_prompts_from_the_start(
    tmp_path: Path,
) -> None:
    place = make_place(tmp_path, Scenario([("Hello?", [Step(text="Hello there.")])]))
    with Server(place) as first:
        session_id = first.new_session()
    with Server(place) as second:
        loaded = second.load(session_id)
        answered = second.prompt(session_id, "Hello?")

    assert loaded.response["result"] == session_setup() and loaded.frames == []
    assert answered.result == {"stopReason": "end_turn"}
    assert answered.updates == message_chunks("Hello there.", "assistant-0-0")


def test_a_session_another_process_holds_is_refused_until_that_process_exits(
    tmp_path: Path,
) -> None:
    place = make_place(tmp_path, Scenario([("Hello?", [Step(text="Hello there.")])]))
    with Server(place) as holder, Server(place) as other:
        session_id = holder.new_session()
        refused = other.load(session_id)
        assert refused.frames == []
        assert refused.error == {
            "code": -32011,
            "message": "Session in use: another process has it open for writing",
            "data": {"reason": "locked"},
        }
        holder.finish()
        assert other.load(session_id).result == session_setup()


# ---------------------------------------------------------------------------------------------
# Errors.


def test_an_unknown_session_is_minus_32002(tmp_path: Path) -> None:
    place = make_place(tmp_path, Scenario([]))
    with Server(place) as server:
        refused = server.load("no-such-session")

    assert refused.frames == []
    assert refused.error == {
        "code": -32002,
        "message": "Unknown session: no-such-session",
        "data": {"sessionId": "no-such-session"},
    }


def _write_log(place: Place, session_id: str, version: int, body: list[dict[str, Any]]) -> Path:
    header = {
        "type": "session",
        "version": version,
        "id": session_id,
        "createdAt": 0,
        "cwd": str(place.workspace),
    }
    path = place.log_path(session_id)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(json.dumps(value).encode() + b"\n" for value in [header, *body]))
    return path


def test_a_corrupt_log_is_minus_32010_naming_the_line_and_is_left_unchanged(tmp_path: Path) -> None:
    place = make_place(tmp_path, Scenario([]))
    path = _write_log(
        place,
        "gap",
        SESSION_FORMAT_VERSION,
        [
            {"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 0}},
            {
                "type": "turn/end",
                "seq": 5,
                "time": 0,
                "data": {"turn": 0, "reason": {"kind": "completed"}},
            },
        ],
    )
    before = path.read_bytes()
    with Server(place) as server:
        refused = server.load("gap")

    assert refused.frames == []
    assert refused.error == {
        "code": -32010,
        "message": "Session log unreadable: line 3: seq gap: expected seq 1, found 5",
        "data": {"reason": "corrupt", "line": 3, "detail": "seq gap: expected seq 1, found 5"},
    }
    assert path.read_bytes() == before


def test_a_log_of_another_format_version_is_minus_32010_unsupported_version(tmp_path: Path) -> None:
    place = make_place(tmp_path, Scenario([]))
    newer = SESSION_FORMAT_VERSION + 1
    _write_log(
        place, "newer", newer, [{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 0}}]
    )
    with Server(place) as server:
        refused = server.load("newer")

    assert refused.frames == []
    assert refused.error == {
        "code": -32010,
        "message": f"Session log unreadable: format version {newer} is not supported (this build reads version {SESSION_FORMAT_VERSION})",
        "data": {
            "reason": "unsupported-version",
            "found": newer,
            "supported": SESSION_FORMAT_VERSION,
        },
    }


def test_a_load_while_a_prompt_runs_in_the_session_replays_it_and_the_prompt_goes_on(
    tmp_path: Path,
) -> None:
    working = Step(text="Working on it")
    place = make_place(
        tmp_path,
        Scenario([("Wait.", [working])], override={"patches": [{"at": 0, "entry": hang(working)}]}),
    )
    with Server(place) as server:
        session_id = server.new_session()
        prompt_id = server.start_prompt(session_id, "Wait.")
        for _ in fragments(working.text):
            server.read_frame()

        loaded = server.load(session_id)
        assert loaded.frames[0]["params"]["update"] == {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "Wait."},
            "messageId": "user-0",
        }
        server.process.notify("session/cancel", {"sessionId": session_id})
        assert server.process.response(prompt_id, TIMEOUT)["result"] == {"stopReason": "cancelled"}


def test_a_max_messages_below_one_is_invalid_params(tmp_path: Path) -> None:
    place = make_place(tmp_path, Scenario([]))
    with Server(place) as first:
        session_id = first.new_session()
    with Server(place) as server:
        refused = server.load(session_id, max_messages=0)

    assert refused.frames == []
    assert refused.error == {
        "code": -32602,
        "message": 'Invalid params: Expected `int` >= 1 - at `$._meta["acp-server"].replay.maxMessages`',
        "data": {"path": '$._meta["acp-server"].replay.maxMessages'},
    }


# ---------------------------------------------------------------------------------------------
# SIGKILL in the middle of a streamed step.

STORY = "".join(f"Chapter {n}: the server kept streaming while nobody watched. " for n in range(30))
STORY_PROMPT = "Tell me a long story."
AFTER_CRASH_PROMPT = "Go on."
AFTER_CRASH_TEXT = "Picking up after the crash."


@dataclass(frozen=True)
class Killed:
    place: Place
    session_id: str
    shown: str
    """The text the client had been shown once the log held it (the flusher had written it)."""
    events: list[dict[str, Any]]
    """The log's events as the killed process left them."""


@pytest.fixture(scope="module")
def killed_mid_stream(tmp_path_factory: pytest.TempPathFactory) -> Killed:
    """A first process streams a long text (20 ms a chunk; the script entry hangs after the
    text, so the step never finishes there) and is killed with SIGKILL once the client was
    shown ten fragments and the log holds them."""
    story = Step(text=STORY)
    scenario = Scenario(
        [(STORY_PROMPT, [story]), (AFTER_CRASH_PROMPT, [Step(text=AFTER_CRASH_TEXT)])],
        override={"patches": [{"at": 0, "entry": hang(story)}]},
    )
    place = make_place(tmp_path_factory.mktemp("killed-stream"), scenario)
    first = Server(place, "--pace-ms", "20")
    try:
        session_id = first.new_session()
        first.start_prompt(session_id, STORY_PROMPT)
        shown = "".join(
            first.read_frame()["params"]["update"]["content"]["text"] for _ in range(10)
        )
        path = place.log_path(session_id)
        # The stream goes on; the 100 ms flusher writes the chunks while it runs.
        wait_for(lambda: logged_text(path).startswith(shown), "the log holds the text shown")
        first.kill()
    finally:
        first.process.__exit__(None, None, None)
    events = logged(path)
    assert events[-1]["type"] == "assistant/chunk"
    return Killed(place, session_id, shown, events)


def test_after_a_kill_mid_stream_the_load_shows_the_partial_text(
    killed_mid_stream: Killed, tmp_path: Path
) -> None:
    killed = killed_mid_stream
    with Server(killed.place.copy(tmp_path)) as second:
        loaded = second.load(killed.session_id)

    partial = loaded.updates[1]["content"]["text"]
    assert loaded.result == session_setup()
    assert loaded.updates == [
        user_chunk(STORY_PROMPT, 0),
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": partial},
            "messageId": "assistant-0-0",
        },
    ]
    assert partial == logged_text(killed.place.log_path(killed.session_id))
    assert partial.startswith(killed.shown) and killed.shown
    assert STORY.startswith(partial) and len(partial) < len(STORY)


def test_after_a_kill_mid_stream_the_load_appends_exactly_the_interrupted_closers(
    killed_mid_stream: Killed, tmp_path: Path
) -> None:
    killed = killed_mid_stream
    place = killed.place.copy(tmp_path)
    with Server(place) as second:
        second.load(killed.session_id)
        after = logged(place.log_path(killed.session_id))

    n = len(killed.events)
    assert after[:n] == killed.events
    assert without_time(after[n:]) == [
        {"type": "step/end", "seq": n, "data": {"turn": 0, "step": 0}},
        {"type": "turn/end", "seq": n + 1, "data": {"turn": 0, "reason": {"kind": "interrupted"}}},
    ]


def test_after_a_kill_mid_stream_the_next_prompt_gets_the_next_script_entry(
    killed_mid_stream: Killed, tmp_path: Path
) -> None:
    killed = killed_mid_stream
    with Server(killed.place.copy(tmp_path)) as second:
        second.load(killed.session_id)
        answered = second.prompt(killed.session_id, AFTER_CRASH_PROMPT)

    assert answered.result == {"stopReason": "end_turn"}
    assert answered.updates == message_chunks(AFTER_CRASH_TEXT, "assistant-1-0")


# ---------------------------------------------------------------------------------------------
# SIGKILL while a tool call waits for the user's permission.

WRITE_PROMPT = "Write out.txt."
WRITE_ARGS = args(path="out.txt", content="hello\n")
RETRY_PROMPT = "Try again."
RETRY_TEXT = "Nothing was written: the session was interrupted."


@pytest.fixture(scope="module")
def killed_in_tool(tmp_path_factory: pytest.TempPathFactory) -> Killed:
    """A first process streams a `write_file` call and is killed while the permission request
    waits for an answer (the call is logged, its result is not)."""
    scenario = Scenario(
        [
            (
                WRITE_PROMPT,
                [Step(text="Writing it.", calls=[ToolUse("call_write", "write_file", WRITE_ARGS)])],
            ),
            (RETRY_PROMPT, [Step(text=RETRY_TEXT)]),
        ]
    )
    place = make_place(tmp_path_factory.mktemp("killed-tool"), scenario)
    first = Server(place)
    try:
        session_id = first.new_session()
        first.start_prompt(session_id, WRITE_PROMPT)
        while (frame := first.read_frame()).get("method") != "session/request_permission":
            assert frame.get("method") == "session/update", frame
        first.kill()
    finally:
        first.process.__exit__(None, None, None)
    events = logged(place.log_path(session_id))
    assert [e["type"] for e in events[-3:]] == ["assistant/chunk", "assistant/message", "tool/call"]
    return Killed(place, session_id, "", events)


def test_after_a_kill_in_a_tool_call_the_load_shows_the_call_failed_as_interrupted(
    killed_in_tool: Killed, tmp_path: Path
) -> None:
    with Server(killed_in_tool.place.copy(tmp_path)) as second:
        loaded = second.load(killed_in_tool.session_id)

    assert loaded.updates == [
        user_chunk(WRITE_PROMPT, 0),
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "Writing it."},
            "messageId": "assistant-0-0",
        },
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_write",
            "title": "Write out.txt",
            "kind": "edit",
            "status": "pending",
            "rawInput": {"path": "out.txt", "content": "hello\n"},
            "name": "write_file",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_write",
            "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "interrupted"}}],
            "name": "write_file",
        },
    ]


def test_after_a_kill_in_a_tool_call_the_load_appends_its_error_result_and_the_closers(
    killed_in_tool: Killed, tmp_path: Path
) -> None:
    killed = killed_in_tool
    place = killed.place.copy(tmp_path)
    with Server(place) as second:
        second.load(killed.session_id)
        after = logged(place.log_path(killed.session_id))

    n = len(killed.events)
    call_seq = n - 1
    assert after[:n] == killed.events
    assert without_time(after[n:]) == [
        {
            "type": "tool/result",
            "seq": n,
            "data": {
                "turn": 0,
                "step": 0,
                "callId": "call_write",
                "content": [{"type": "text", "text": "interrupted"}],
                "isError": True,
            },
            "sourceRange": [call_seq, call_seq],
        },
        {"type": "step/end", "seq": n + 1, "data": {"turn": 0, "step": 0}},
        {"type": "turn/end", "seq": n + 2, "data": {"turn": 0, "reason": {"kind": "interrupted"}}},
    ]
    assert not (place.workspace / "out.txt").exists()


def test_after_a_kill_in_a_tool_call_the_next_prompt_gets_the_next_script_entry(
    killed_in_tool: Killed, tmp_path: Path
) -> None:
    with Server(killed_in_tool.place.copy(tmp_path)) as second:
        second.load(killed_in_tool.session_id)
        answered = second.prompt(killed_in_tool.session_id, RETRY_PROMPT)

    assert answered.result == {"stopReason": "end_turn"}
    assert answered.updates == message_chunks(RETRY_TEXT, "assistant-1-0")


# ---------------------------------------------------------------------------------------------
# Tail replay: `_meta["acp-server"].replay.maxMessages`.

TAIL_TURNS = [
    ("One?", [Step(text="First answer.")]),
    (
        "Two?",
        [
            Step(
                text="Reading notes.txt.",
                calls=[ToolUse("call_notes", "read_file", args(path="notes.txt"))],
            ),
            Step(text="Second answer."),
        ],
    ),
    ("Three?", [Step(text="Third answer.")]),
    ("Four?", [Step(text="Fourth answer.")]),
]
"""Messages per turn: 2, 3, 2 and 2 (9 in all)."""

TURN_STARTS = [0, 14, 52, 66]
"""The seq of each turn's `turn/start` in the recorded log (the fixture checks it)."""


@dataclass(frozen=True)
class RecordedTurns:
    place: Place
    session_id: str
    replays: list[list[dict[str, Any]]]
    """Per turn: the expected replay of that turn (its prompt, then its completed content)."""


@pytest.fixture(scope="module")
def four_turns(tmp_path_factory: pytest.TempPathFactory) -> RecordedTurns:
    place = make_place(tmp_path_factory.mktemp("tail"), Scenario(TAIL_TURNS))
    (place.workspace / "notes.txt").write_text("nothing to add\n")
    with Server(place) as first:
        session_id = first.new_session()
        replays = []
        for turn, (prompt, _steps) in enumerate(TAIL_TURNS):
            answered = first.prompt(session_id, prompt)
            assert answered.result == {"stopReason": "end_turn"}
            replays.append([user_chunk(prompt, turn), *completed(answered.updates)])
    starts = [e["seq"] for e in logged(place.log_path(session_id)) if e["type"] == "turn/start"]
    assert starts == TURN_STARTS
    return RecordedTurns(place, session_id, replays)


@pytest.mark.parametrize(
    ("max_messages", "first_turn", "replayed_from_seq", "has_more"),
    [
        (1, 3, 66, True),
        (2, 3, 66, True),
        (3, 2, 52, True),
        (4, 2, 52, True),
        (5, 1, 14, True),
        (7, 1, 14, True),
        (8, 0, 0, False),
        (9, 0, 0, False),
        (50, 0, 0, False),
    ],
)
def test_a_tail_replay_starts_at_the_turn_holding_the_oldest_message_asked_for(
    four_turns: RecordedTurns,
    tmp_path: Path,
    max_messages: int,
    first_turn: int,
    replayed_from_seq: int,
    has_more: bool,
) -> None:
    with Server(four_turns.place.copy(tmp_path)) as server:
        loaded = server.load(four_turns.session_id, max_messages)

    assert loaded.result == {
        **session_setup(),
        "_meta": {"acp-server": {"replayedFromSeq": replayed_from_seq, "hasMore": has_more}},
    }
    assert replayed_from_seq == TURN_STARTS[first_turn]
    assert loaded.updates == list(itertools.chain.from_iterable(four_turns.replays[first_turn:]))
