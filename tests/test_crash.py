"""SIGKILL at random points of a streaming turn: nothing the client was shown is lost (SPEC 2.4, 2.5).

Each trial runs the real server in a subprocess over one paced fixture turn that covers every
kind of kill point: streaming reasoning and text, streaming a tool call's arguments, a pending
permission request (left unanswered), the step boundaries, and a subagent's turn. The test
client follows the session (`session.follow`, and the child session once `subagent/start`
shows) while it prompts, so it is shown every event the moment the server appends it, and it
stamps every frame with the time it read it. The trial picks a kind of kill point and a random
delay after that point's trigger (seeded), then kills the server with SIGKILL. Trials alternate
between plain and Zstandard logs (`--compression zstd`).

After the kill:

- every event the client was shown more than `FLUSH_MARGIN_S` before the kill is in the log,
  exactly (chunks are flushed every 100 ms, SPEC 2.4), and so is everything shown before a sync
  point the client saw (a permission request comes after the log was synced);
- the text shown live is a prefix of the logged text of its step; every tool call, result and
  plan shown is logged;
- `verify_bytes` finds no problem in the parent's log or any child's;
- a fresh process loads the session (the replay, then `{}`); the log keeps every byte of its
  events and gains exactly the interrupted closers; and the next prompt runs the next script
  entries to `end_turn`.

`ACP_CRASH_TRIALS` sets the number of trials (default 15, about 25 s on two cores),
`ACP_CRASH_SEED` the base seed, and `ACP_CRASH_REPORT` a file to which each trial appends one
JSON line (kind, delay, where the log ended, events shown, events lost).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
from acp_process import AcpProcess, assert_jsonrpc_frame
from fixtures_builder import Scenario, Step, ToolUse, args, step_chunks, write_fixture
from polling import TIMEOUT
from surface_values import session_setup

from acp_server.cli.log import verify_bytes
from acp_server.core.history import expand_history_records
from acp_server.storage.jsonl.lines import log_compression
from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

TRIALS = int(os.environ.get("ACP_CRASH_TRIALS", "15"))
BASE_SEED = int(os.environ.get("ACP_CRASH_SEED", "20250611"))
REPORT = os.environ.get("ACP_CRASH_REPORT")

PACE_MS = 5
FLUSH_MARGIN_S = 0.15
"""The flusher writes chunks every 100 ms; what was shown longer ago than this is on disk."""

# ---------------------------------------------------------------------------------------------
# The fixture: turn 0 has every kind of kill point; turn 1 is what comes next.

LONG_TEXT = "".join(f"Line {n} of the plan: keep every byte the user saw. " for n in range(6))
NOTES = "".join(f"note {n}: streamed arguments are data too; " for n in range(5))
CHILD_TEXT = "".join(f"Summary part {n}: the notes say to keep the log whole. " for n in range(5))

WRITE = ToolUse("call_write", "write_file", args(path="notes.txt", content=NOTES))
PLAN = ToolUse(
    "call_plan",
    "todo_write",
    args(todos=[{"content": "Summarize the notes", "status": "in_progress"}]),
)
TASK = ToolUse("call_task", "task", args(prompt="Summarize notes.txt"))

SCRIPT = [
    Step(reasoning="First the notes, then the plan, then a helper.", text=LONG_TEXT, calls=[WRITE]),
    Step(text="Recording the plan.", calls=[PLAN]),
    Step(text="Asking a helper.", calls=[TASK]),
    Step(text="All done."),
    Step(text="Picking up where we left off."),
]
"""The primary script's model calls in order: turn 0 is entries 0 to 3, turn 1 is entry 4."""

FIRST_PROMPT = "Write the notes and summarize them."
NEXT_PROMPT = "Go on."
CHILD_PROMPT = "Summarize notes.txt"

KINDS = ("text", "tool-args", "permission", "between-steps", "subagent")

ALLOW_ONCE = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def scenario() -> Scenario:
    return Scenario(
        [(FIRST_PROMPT, SCRIPT[:4]), (NEXT_PROMPT, SCRIPT[4:])],
        children=[[(CHILD_PROMPT, [Step(text=CHILD_TEXT)])]],
    )


def count_chunks(step: Step, kind: str) -> int:
    return sum(1 for c in step_chunks(step) if c["type"] == kind)


# ---------------------------------------------------------------------------------------------
# One trial.


@dataclass
class Plan:
    """Where to kill: the trigger (a predicate over what the client has seen) and the delay."""

    kind: str
    trigger: Callable[[Seen], bool]
    delay: float
    answer_permissions: bool
    detail: str


@dataclass
class Seen:
    """What the client read before the kill, each item stamped with `time.monotonic()`."""

    frames: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    events: dict[str, list[tuple[float, dict[str, Any]]]] = field(default_factory=dict)
    """Per session id: every event shown by `session.follow` (snapshot records and
    `session.event` notifications), as JSON values."""
    subscriptions: dict[str, str] = field(default_factory=dict)
    """Subscription id -> session id."""
    follow_requests: dict[Any, str] = field(default_factory=dict)
    """Request id of a pending `session.follow` -> the session it follows."""
    permission_requests: list[dict[str, Any]] = field(default_factory=list)

    def updates(self) -> list[tuple[float, dict[str, Any]]]:
        return [
            (t, f["params"]["update"])
            for t, f in self.frames
            if f.get("method") == "session/update"
        ]

    def chunk_events(self, chunk_type: str) -> int:
        return sum(
            1
            for events in self.events.values()
            for _, e in events
            if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == chunk_type
        )


def make_plan(rng: random.Random, kind: str) -> Plan:
    pace = PACE_MS / 1000
    if kind == "text":
        total = count_chunks(SCRIPT[0], "reasoning-delta") + count_chunks(SCRIPT[0], "text-delta")
        k = rng.randint(1, total)

        def shown_chunks(seen: Seen) -> bool:
            return (
                sum(
                    1
                    for _, u in seen.updates()
                    if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")
                )
                >= k
            )

        return Plan(
            kind, shown_chunks, rng.uniform(0, 2 * pace), True, f"after live chunk {k} of {total}"
        )
    if kind == "tool-args":
        total = count_chunks(SCRIPT[0], "tool-call-delta")
        k = rng.randint(1, total - 1)
        return Plan(
            kind,
            lambda seen: seen.chunk_events("tool-call-delta") >= k,
            rng.uniform(0, 2 * pace),
            True,
            f"after argument chunk {k} of {total}",
        )
    if kind == "permission":
        return Plan(
            kind,
            lambda seen: bool(seen.permission_requests),
            rng.uniform(0, 0.25),
            False,
            "permission pending",
        )
    if kind == "between-steps":
        call_id = rng.choice([WRITE.id, PLAN.id])

        def step_done(seen: Seen) -> bool:
            return any(
                u["sessionUpdate"] == "tool_call_update"
                and u["toolCallId"] == call_id
                and u["status"] in ("completed", "failed")
                for _, u in seen.updates()
            )

        return Plan(
            kind, step_done, rng.uniform(0, 2 * pace), True, f"after the result of {call_id}"
        )
    if kind == "subagent":
        child_stream = len(step_chunks(Step(text=CHILD_TEXT))) * pace

        def task_started(seen: Seen) -> bool:
            return any(
                u["sessionUpdate"] == "tool_call_update"
                and u["toolCallId"] == TASK.id
                and u["status"] == "in_progress"
                for _, u in seen.updates()
            )

        return Plan(
            kind, task_started, rng.uniform(0, 0.9 * child_stream), True, "the child is streaming"
        )
    raise ValueError(kind)


@dataclass
class Place:
    fixture: Path
    workspace: Path
    sessions: Path
    compression: str

    def log_path(self, session_id: str) -> Path:
        return (
            self.sessions
            / session_id
            / ("session.jsonl.zst" if self.compression == "zstd" else "session.jsonl")
        )

    def server(self, *flags: str) -> AcpProcess:
        # Titles off: what is shown and recovered here is the turns'.
        return AcpProcess(
            self.sessions, "--replay", str(self.fixture), "--compression", self.compression,
            "--titles", "off", *flags,
        )  # fmt: skip


def make_place(tmp_path: Path, compression: str) -> Place:
    root = tmp_path.resolve()
    workspace = root / "workspace"
    workspace.mkdir()
    return Place(
        write_fixture(root / "fixture", scenario()), workspace, root / "sessions", compression
    )


def follow(server: AcpProcess, seen: Seen, session_id: str, address: dict[str, Any]) -> None:
    request_id = server.send_request("session.follow", {"address": address})
    seen.follow_requests[request_id] = session_id


def handle(
    server: AcpProcess, seen: Seen, plan: Plan, parent: str, now: float, frame: dict[str, Any]
) -> None:
    """Record one frame and act on it as the client would."""
    seen.frames.append((now, frame))
    method = frame.get("method")
    if method == "session/request_permission":
        seen.permission_requests.append(frame)
        if plan.answer_permissions:
            server.send({"jsonrpc": "2.0", "id": frame["id"], "result": ALLOW_ONCE})
    elif method == "session.event":
        session_id = seen.subscriptions[frame["params"]["subscriptionId"]]
        event = frame["params"]["event"]
        seen.events.setdefault(session_id, []).append((now, event))
        if event["type"] == "subagent/start" and session_id == parent:
            child = event["data"]["childSessionId"]
            follow(
                server,
                seen,
                child,
                {"kind": "subagent", "parentSessionId": parent, "childSessionId": child},
            )
    elif method is None and frame.get("id") in seen.follow_requests:
        session_id = seen.follow_requests.pop(frame["id"])
        result = frame["result"]
        seen.subscriptions[result["subscriptionId"]] = session_id
        snapshot = [
            msgspec.json.decode(msgspec.json.encode(e))
            for e in expand_history_records(result["records"])
        ]
        seen.events.setdefault(session_id, []).extend((now, e) for e in snapshot)


def logged(path: Path) -> list[dict[str, Any]]:
    return [msgspec.json.decode(msgspec.json.encode(e)) for e in read_log(path).events]


def without_time(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "time"} for e in events]


def expected_closers(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What recovery must append to a log whose last turn has no `turn/end` (SPEC 2.5), without
    times: an error result for each unanswered call, the missing `step/end`, `turn/end`."""
    starts = [i for i, e in enumerate(events) if e["type"] == "turn/start"]
    if not starts or any(e["type"] == "turn/end" for e in events[starts[-1] :]):
        return []
    turn = events[starts[-1]]["data"]["turn"]
    calls: dict[str, dict[str, Any]] = {}
    step: int | None = None
    for event in events[starts[-1] :]:
        if event["type"] == "tool/call":
            calls[event["data"]["callId"]] = event
        elif event["type"] == "tool/result":
            calls.pop(event["data"]["callId"], None)
        elif event["type"] == "step/start":
            step = event["data"]["step"]
        elif event["type"] == "step/end":
            step = None
    seq = len(events)
    closers: list[dict[str, Any]] = []
    for call in calls.values():
        data = call["data"]
        result = {
            "turn": data["turn"],
            "step": data["step"],
            "callId": data["callId"],
            "content": [{"type": "text", "text": "interrupted"}],
            "isError": True,
        }
        closers.append(
            {
                "type": "tool/result",
                "seq": seq,
                "data": result,
                "sourceRange": [call["seq"], call["seq"]],
            }
        )
        seq += 1
    if step is not None:
        closers.append({"type": "step/end", "seq": seq, "data": {"turn": turn, "step": step}})
        seq += 1
    closers.append(
        {"type": "turn/end", "seq": seq, "data": {"turn": turn, "reason": {"kind": "interrupted"}}}
    )
    return closers


def where_it_ended(events: list[dict[str, Any]]) -> str:
    """Where the killed process left the log, named like the kinds of kill points."""
    if not events:
        return "before the turn"
    last = events[-1]
    kind = last["type"]
    open_calls = {
        e["data"]["callId"]: e["data"]["name"] for e in events if e["type"] == "tool/call"
    }
    for e in events:
        if e["type"] == "tool/result":
            open_calls.pop(e["data"]["callId"], None)
    if "task" in open_calls.values():
        return "subagent"
    if "write_file" in open_calls.values():
        return "tool run (permission)"
    if kind == "assistant/chunk":
        chunk = last["data"]["chunk"]["type"]
        if chunk in ("text-delta", "reasoning-delta"):
            return "streaming text"
        if chunk == "tool-call-delta":
            return "streaming tool call"
        return f"stream ({chunk})"
    if kind in ("step/end", "step/start"):
        return "between steps"
    return kind


def step_text(events: list[dict[str, Any]], turn: int, step: int, chunk_type: str) -> str:
    return "".join(
        e["data"]["chunk"]["text"]
        for e in events
        if e["type"] == "assistant/chunk"
        and (e["data"]["turn"], e["data"]["step"]) == (turn, step)
        and e["data"]["chunk"]["type"] == chunk_type
    )


def check_log_holds_what_was_shown(
    seen: Seen, killed_at: float, place: Place, parent: str, outcome: dict[str, Any]
) -> None:
    """The checks on the killed logs; counts what was shown in time to be flushed, and lost."""
    due = killed_at - FLUSH_MARGIN_S
    shown_in_time = 0
    lost: list[str] = []
    for session_id, shown in seen.events.items():
        events = logged(place.log_path(session_id))
        for at, event in shown:
            if at > due:
                continue
            shown_in_time += 1
            if event["seq"] >= len(events) or events[event["seq"]] != event:
                lost.append(
                    f"{session_id} seq {event['seq']} ({event['type']}) shown {killed_at - at:.3f}s before the kill"
                )
    outcome["events_shown_before_flush"] = shown_in_time
    outcome["events_lost"] = len(lost)
    assert not lost, f"{len(lost)} events shown before the last flush are missing:\n" + "\n".join(
        lost
    )

    events = logged(place.log_path(parent))
    # A permission request comes after the sync before the tool runs: its call is logged.
    for request in seen.permission_requests:
        call_id = request["params"]["toolCall"]["toolCallId"]
        assert any(e["type"] == "tool/call" and e["data"]["callId"] == call_id for e in events), (
            call_id
        )
    # What the prompt showed live, longer ago than the flush interval, is logged.
    shown_text: dict[tuple[str, str], str] = {}
    for at, update in seen.updates():
        if at > due:
            continue
        kind = update["sessionUpdate"]
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            key = (kind, update["messageId"])
            shown_text[key] = shown_text.get(key, "") + update["content"]["text"]
        elif kind == "tool_call":
            assert any(
                e["type"] == "tool/call" and e["data"]["callId"] == update["toolCallId"]
                for e in events
            ), update
        elif kind == "tool_call_update" and update["status"] in ("completed", "failed"):
            assert any(
                e["type"] == "tool/result" and e["data"]["callId"] == update["toolCallId"]
                for e in events
            ), update
        elif kind == "plan":
            assert any(e["type"] == "plan/update" for e in events), update
    for (kind, message_id), text in shown_text.items():
        _, turn, step = message_id.split("-")
        chunk_type = "text-delta" if kind == "agent_message_chunk" else "reasoning-delta"
        assert step_text(events, int(turn), int(step), chunk_type).startswith(text), (
            message_id,
            text,
        )


def verify_clean(path: Path) -> list[str]:
    """`verify_bytes` finds no problem; its notes (a torn tail, an open turn) are returned."""
    report = verify_bytes(path, path.read_bytes(), log_compression(path))
    assert report.problems == [], [(p.line, p.message) for p in report.problems]
    return report.notes


def expected_next_text(step_starts: int) -> str:
    """The text the next prompt streams: the script resumes at the entry after the model calls
    the log holds, and runs until an entry that finishes with `stop`."""
    text = ""
    for step in SCRIPT[step_starts:]:
        text += step.text
        if step.finish_reason == "stop":
            return text
    raise AssertionError(f"the script has no stop after entry {step_starts}")


def run_trial(tmp_path: Path, trial: int, outcome: dict[str, Any]) -> None:
    """One trial; `outcome` gets its figures as they are known (for the report)."""
    rng = random.Random(BASE_SEED + trial)
    kind = KINDS[trial % len(KINDS)]
    compression = "zstd" if trial % 2 else "none"
    plan = make_plan(rng, kind)
    outcome.update(
        trial=trial,
        seed=BASE_SEED + trial,
        kind=kind,
        compression=compression,
        detail=plan.detail,
        delay_ms=round(plan.delay * 1000, 1),
    )
    place = make_place(tmp_path, compression)
    seen = Seen()

    first = place.server("--pace-ms", str(PACE_MS))
    try:
        first.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, TIMEOUT)
        parent = first.result(
            "session/new", {"cwd": str(place.workspace), "mcpServers": []}, TIMEOUT
        )["sessionId"]
        follow(first, seen, parent, {"kind": "session", "sessionId": parent})
        prompt_id = first.send_request(
            "session/prompt",
            {"sessionId": parent, "prompt": [{"type": "text", "text": FIRST_PROMPT}]},
        )
        deadline: float | None = None
        while True:
            wait = TIMEOUT if deadline is None else max(0.0, deadline - time.monotonic())
            line = first.poll_line(wait)
            now = time.monotonic()
            if line is not None:
                frame = assert_jsonrpc_frame(line)
                assert frame.get("id") != prompt_id, (
                    f"the turn ended before the kill point ({plan.detail}): {frame}"
                )
                handle(first, seen, plan, parent, now, frame)
                if deadline is None and plan.trigger(seen):
                    deadline = now + plan.delay
            elif deadline is None:
                raise AssertionError(f"no frame for {TIMEOUT}s; stderr:\n{first.stderr}")
            if deadline is not None and time.monotonic() >= deadline:
                break
        killed_at = time.monotonic()
        first.kill()
    finally:
        first.__exit__(None, None, None)
    assert "Traceback" not in first.stderr, first.stderr

    parent_path = place.log_path(parent)
    killed_events = logged(parent_path)
    children = [p.name for p in place.sessions.iterdir() if p.name != parent]
    outcome.update(
        ended=where_it_ended(killed_events),
        events_logged=len(killed_events),
        events_shown=sum(len(v) for v in seen.events.values()),
        children=len(children),
    )
    outcome["torn_tail"] = any("incomplete" in note for note in verify_clean(parent_path))
    for child in children:
        verify_clean(place.log_path(child))
    check_log_holds_what_was_shown(seen, killed_at, place, parent, outcome)

    with place.server() as second:
        second.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, TIMEOUT)
        loaded, replay = second.exchange(
            "session/load",
            {"sessionId": parent, "cwd": str(place.workspace), "mcpServers": []},
            timeout=TIMEOUT,
        )
        assert loaded["result"] == session_setup(), loaded
        assert all(
            f.get("method") == "session/update" and f["params"]["sessionId"] == parent
            for f in replay
        ), replay
        if any(e["type"] == "user/message" for e in killed_events):
            assert replay[0]["params"]["update"] == {
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": FIRST_PROMPT},
                "messageId": "user-0",
            }
        after_load = logged(parent_path)
        assert after_load[: len(killed_events)] == killed_events
        assert without_time(after_load[len(killed_events) :]) == expected_closers(killed_events)
        assert verify_clean(parent_path) == []

        step_starts = sum(1 for e in after_load if e["type"] == "step/start")
        answered, frames = second.exchange(
            "session/prompt",
            {"sessionId": parent, "prompt": [{"type": "text", "text": NEXT_PROMPT}]},
            answer=lambda request: ALLOW_ONCE,
            timeout=TIMEOUT,
        )
        assert answered["result"] == {"stopReason": "end_turn"}, answered
        text = "".join(
            f["params"]["update"]["content"]["text"]
            for f in frames
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert text == expected_next_text(step_starts)
        assert second.finish(TIMEOUT) == 0
    assert "Traceback" not in second.stderr, second.stderr
    final = logged(parent_path)
    assert final[: len(after_load)] == after_load
    assert final[-1]["type"] == "turn/end" and final[-1]["data"] == {
        "turn": 1,
        "reason": {"kind": "completed"},
    }
    assert verify_clean(parent_path) == []
    outcome["passed"] = True


@pytest.mark.parametrize("trial", range(TRIALS))
def test_a_kill_loses_nothing_shown_and_the_session_continues(tmp_path: Path, trial: int) -> None:
    outcome: dict[str, Any] = {"passed": False}
    try:
        run_trial(tmp_path, trial, outcome)
    finally:
        if REPORT:
            with open(REPORT, "a") as report:
                report.write(json.dumps(outcome) + "\n")
