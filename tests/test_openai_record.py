"""From a live model to a replayable fixture, end to end, through real processes.

The server runs with `--provider openai` against a loopback OpenAI-compatible server
(tests/openai_server.py); the session it records is exported with `acp-server fixture export`;
a fresh server replays the fixture with llm-replay under the same client script. Both logs hold
the same events (modulo session ids, cwd and times), both transcripts are equal once normalized,
and the API key appears nowhere: not on stdout or stderr, not in the log, not in the fixture.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from openai_server import FakeOpenAI, Sse, Status, call, chunk, reasoning, text, usage
from recorded_sessions import (
    assert_replayed_alike,
    clean_env,
    drive,
    export,
    logical,
    workspace,
)

from acp_server.core.replay_script import parse_fixture

pytestmark = pytest.mark.process

KEY = "sk-live-KEY-4f9d2c7a1b3e5f60SECRET"
CUT_MESSAGE = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)

READ_ARGS = ['{"pa', 'th": "no', 'tes.txt"', "}"]
TODO_ARGS = ['{"todos": [{"con', 'tent": "Read the ', 'notes", "stat', 'us": "completed"}', "]}"]

TURN_0_STEP_0 = Sse([
    chunk({"role": "assistant", "content": ""}),
    reasoning("The user wants "), reasoning("the notes read."),
    text("Let me "), text("look."),
    call(0, id="call_read", name="read_file", arguments=""), *(call(0, arguments=a) for a in READ_ARGS),
    call(1, id="call_todo", name="todo_write", arguments=""), *(call(1, arguments=a) for a in TODO_ARGS),
    chunk(finish="tool_calls"),
    usage(120, 40, cached=64),
])  # fmt: skip
TURN_0_STEP_1 = Sse(
    [text("The notes "), text("say alpha "), text("and beta."), chunk(finish="stop"), usage(180, 9)]
)
TURN_1_CUT = Sse([text("Think"), text("ing ab"), text("out it")], cut=True)
TURN_2_MALFORMED = Sse([reasoning("Hmm"), "{not json"])
TURN_3 = Sse([text("Still "), text("here."), chunk(finish="stop")])

PROMPTS = ["Read notes.txt and keep a plan.", "Tell me more.", "And now?", "Are you there?"]


def live_script() -> list[Any]:
    rate_limited = Status(
        429, {"error": {"message": "Rate limit reached"}}, headers={"retry-after-ms": "50"}
    )
    return [rate_limited, TURN_0_STEP_0, TURN_0_STEP_1, TURN_1_CUT, TURN_2_MALFORMED, TURN_3]


def test_record_a_live_session_export_it_and_replay_it_to_the_same_events(tmp_path: Path) -> None:
    live_cwd = workspace(tmp_path / "live-workspace")
    live_sessions = tmp_path / "live-sessions"
    model = FakeOpenAI(live_script())
    with model, AcpProcess(
        live_sessions,
        "--provider", "openai", "--model", "test", "--base-url", model.base_url, "--log-level", "debug",
        "--titles", "prompt",  # a recording replays its titles as llm-replay makes them
        env=clean_env(OPENAI_API_KEY=KEY),
    ) as live:  # fmt: skip
        live_session, live_responses = drive(live, live_cwd, PROMPTS)
        assert live.finish() == 0
    requests = model.requests

    # What the model was asked: one retry after the 429, the key only in its header.
    assert len(requests) == 6
    assert requests[1].at - requests[0].at >= 0.05
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in requests)
    assert all(KEY not in json.dumps(r.body) for r in requests)
    step_1 = requests[2].body["messages"]
    assert [m["role"] for m in step_1] == ["system", "user", "assistant", "tool", "tool"]
    step_1 = step_1[1:]
    assert step_1[1]["tool_calls"][0]["function"] == {
        "name": "read_file",
        "arguments": "".join(READ_ARGS),
    }
    assert step_1[2]["tool_call_id"] == "call_read" and "alpha" in step_1[2]["content"]

    # The prompts' outcomes: a tool round then an answer, a cut stream, a malformed event, then fine.
    assert [r.get("result", {}).get("stopReason") for r in live_responses] == [
        "end_turn",
        None,
        None,
        "end_turn",
    ]
    cut, malformed = live_responses[1]["error"], live_responses[2]["error"]
    assert cut["data"] == {
        "message": f"openai: the stream was cut: {CUT_MESSAGE} (after 4 chunks)",
        "code": "stream-cut",
    }
    assert malformed["data"]["code"] == "malformed-event"
    assert malformed["data"]["message"].startswith(
        "openai: malformed server-sent event 2 (JSON is malformed"
    )

    # The log holds every delta exactly as the server sent it.
    live_log = live_sessions / live_session / "session.jsonl"
    _, live_events = logical(live_log, live_session, live_cwd)
    first_step = [
        e["data"]["chunk"]
        for e in live_events
        if e["type"] == "assistant/chunk" and e["data"]["turn"] == 0 and e["data"]["step"] == 0
    ]
    read_deltas = [c["argumentsDelta"] for c in first_step if c.get("id") == "call_read"]
    todo_deltas = [c["argumentsDelta"] for c in first_step if c.get("id") == "call_todo"]
    assert read_deltas == ["", *READ_ARGS] and todo_deltas == ["", *TODO_ARGS]
    assert [c["text"] for c in first_step if c["type"] == "reasoning-delta"] == [
        "The user wants ",
        "the notes read.",
    ]
    assert first_step[-2:] == [
        {
            "type": "usage",
            "usage": {"inputTokens": 120, "outputTokens": 40, "cachedInputTokens": 64},
        },
        {"type": "finish", "reason": "tool-calls"},
    ]

    # Export the session as a scenario's fixture.
    scenario = tmp_path / "scenario"
    exported = export(live_sessions / live_session, scenario)
    assert sorted(p.name for p in scenario.iterdir()) == ["replay.override.json", "session.jsonl"]
    override = json.loads((scenario / "replay.override.json").read_text())
    assert [(p["at"], p["entry"]["kind"], p["entry"].get("code")) for p in override["patches"]] == [
        (2, "throw", "stream-cut"),
        (3, "throw", "malformed-event"),
    ]
    fixture = parse_fixture("session.jsonl", (scenario / "session.jsonl").read_bytes().splitlines())
    assert (fixture.header.id, fixture.header.cwd, fixture.header.created_at) == (
        "<session-1>",
        "<workspace>",
        0,
    )

    # Replay it in a fresh server, from another workspace, under the same client script.
    assert_replayed_alike(
        tmp_path, scenario, PROMPTS, (live, live_log, live_session, live_cwd, live_responses)
    )

    # No secret anywhere.
    outputs = {
        "live stdout": b"\n".join(live.stdout_lines).decode(),
        "live stderr": live.stderr,
        "live log": live_log.read_text(),
        "export output": exported.stdout + exported.stderr,
        **{f"fixture {p.name}": p.read_text() for p in scenario.iterdir()},
    }
    for where, content in outputs.items():
        assert KEY not in content, where
    assert "HTTP Request: POST" in live.stderr  # debug logging was on, and still no key


def test_a_missing_key_is_a_warning_and_the_server_still_asks(tmp_path: Path) -> None:
    model = FakeOpenAI([Status(401, {"error": {"message": "You didn't provide an API key."}})])
    with (
        model,
        AcpProcess(
            tmp_path / "s",
            "--provider",
            "openai",
            "--model",
            "m",
            "--base-url",
            model.base_url,
            env=clean_env(),
        ) as live,
    ):
        live.initialize()
        session = live.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        response, _ = live.exchange(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
        )
        assert live.finish() == 0
    assert "Authorization" not in model.requests[0].headers
    assert response["error"]["data"] == {
        "message": f"openai: HTTP 401 Unauthorized from {model.base_url}/chat/completions: You didn't provide an API key.",
        "code": 401,
    }
    assert "$OPENAI_API_KEY is not set" in live.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider", "openai"], "--provider openai needs --model"),
        (["--model", "m"], "--model applies to --provider openai or anthropic only"),
        (
            ["--provider", "openai", "--model", "m", "--replay", "."],
            "--replay applies to --provider llm-replay only",
        ),
        (
            ["--provider", "openai", "--model", "m", "--base-url", "file:///x"],
            "--base-url: not an http(s) URL: 'file:///x'",
        ),
        (
            ["--provider", "openai", "--model", "m", "--read-timeout", "0"],
            "argument --read-timeout: must be a positive number of seconds, got '0'",
        ),
    ],
)
def test_bad_provider_flags_exit_2_with_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", str(tmp_path), *args],
        check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"acp-server serve: error: {message}"]
    assert done.stdout == ""


def test_export_refuses_bad_paths_with_status_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    for session, scenario, message in [
        (
            tmp_path / "missing",
            tmp_path / "out",
            f"{tmp_path / 'missing'}: no such file or directory",
        ),
        (
            tmp_path / "empty",
            tmp_path / "out",
            f"{tmp_path / 'empty'}: no session.jsonl or session.jsonl.zst in this directory",
        ),
        (tmp_path / "empty", tmp_path / "file", f"{tmp_path / 'file'}: not a directory"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "acp_server", "fixture", "export", str(session), str(scenario)],
            check=False, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2
        assert done.stderr.splitlines() == [f"acp-server fixture export: error: {message}"]
    assert not (tmp_path / "out").exists()
