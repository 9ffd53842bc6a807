"""`--provider anthropic` through real processes, against a loopback Anthropic server.

A recorded live session (signed thinking across a tool-use turn, a 529 and a 429 retried, a
cut stream) is exported with `acp-server fixture export` and replayed by llm-replay to the
same events and the same transcript. The key, given in `$ANTHROPIC_API_KEY`, is sent in the
`x-api-key` header and is found nowhere else: not in the server's `/proc/<pid>/environ`, not in
what the programs the model runs can read, not on stdout or stderr, in the log or the fixture.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from anthropic_server import (
    FakeAnthropic,
    Sse,
    Status,
    block_start,
    delta,
    error_body,
    message_start,
    reply,
    text_block,
    thinking_block,
    tool_block,
)
from recorded_sessions import (
    assert_replayed_alike,
    clean_env,
    drive,
    export,
    logical,
    workspace,
)

KEY = "sk-ant-api03-Zq8Wm3Kx7Lp2Vn9Bt4Hc6Jd1RfSECRET"
"""No 8 characters of it in a row appear anywhere by chance."""

pytestmark = [
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="/proc/<pid>/environ is Linux's"
    ),
    pytest.mark.process,
]

READ_ARGS = ['{"pa', 'th": "no', 'tes.txt"}']
PROMPTS = ["Read notes.txt.", "Tell me more.", "And now?"]


def live_script() -> list[Any]:
    overloaded = Status(529, error_body("overloaded_error", "Overloaded"))
    limited = Status(429, error_body("rate_limit_error", "slow down"), {"retry-after": "0"})
    turn_0_step_0 = Sse(reply(
        thinking_block(0, "The user wants ", "the notes.", signature="sig-step-0"),
        text_block(1, "Let me ", "look."),
        tool_block(2, "toolu_read", "read_file", *READ_ARGS),
        stop="tool_use",
    ))  # fmt: skip
    turn_0_step_1 = Sse(reply(text_block(0, "They say ", "alpha and beta.")))
    turn_1_cut = Sse(
        [
            message_start(),
            block_start(0, {"type": "text", "text": ""}),
            delta(0, {"type": "text_delta", "text": "Think"}),
            delta(0, {"type": "text_delta", "text": "ing"}),
        ],
        cut=True,
    )
    turn_2 = Sse(reply(thinking_block(0, "Again.", signature="sig-turn-2"), text_block(1, "Here.")))
    return [overloaded, turn_0_step_0, turn_0_step_1, turn_1_cut, limited, turn_2]


def key_pieces_in(text: str) -> list[str]:
    """Every 8 characters of the key in a row that occur in `text`."""
    return sorted({KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text})


def allow(frame: dict[str, Any]) -> Any:
    assert frame["method"] == "session/request_permission", frame
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def live_server(sessions: Path, model: FakeAnthropic, *extra: str) -> AcpProcess:
    return AcpProcess(
        sessions,
        "--provider", "anthropic", "--model", "claude-test", "--base-url", model.base_url,
        "--log-level", "debug", "--titles", "prompt", *extra,
        env=clean_env(ANTHROPIC_API_KEY=KEY),
    )  # fmt: skip


def test_record_a_live_anthropic_session_export_it_and_replay_it_to_the_same_events(
    tmp_path: Path,
) -> None:
    live_cwd = workspace(tmp_path / "live-workspace")
    live_sessions = tmp_path / "live-sessions"
    model = FakeAnthropic(live_script())
    with model, live_server(live_sessions, model, "--thinking-budget", "2048") as live:
        live_session, live_responses = drive(live, live_cwd, PROMPTS, allow)
        assert live.finish() == 0
    requests = model.requests

    # One retry after the 529, one after the 429; the key in its header only.
    assert len(requests) == 6
    assert all(r.headers["x-api-key"] == KEY for r in requests)
    assert all(key_pieces_in(r.raw.decode()) == [] for r in requests)
    assert requests[1].body == requests[0].body
    assert requests[1].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    # The step after the tool call sends the signed thinking back with it.
    assert requests[2].body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "The user wants the notes.", "signature": "sig-step-0"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_read", "name": "read_file", "input": {"path": "notes.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_read",
                    "content": [{"type": "text", "text": "alpha\nbeta\n"}],
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]  # fmt: skip
    assert [r.get("result", {}).get("stopReason") for r in live_responses] == [
        "end_turn",
        None,
        "end_turn",
    ]
    cut = live_responses[1]["error"]["data"]
    assert cut["code"] == "stream-cut"
    assert cut["message"].startswith("anthropic: the stream was cut: ")
    assert cut["message"].endswith(" (after 3 chunks)")

    # The log keeps the signature as a chunk of its own and on the assembled message.
    live_log = live_sessions / live_session / "session.jsonl"
    _, live_events = logical(live_log, live_session, live_cwd)
    signatures = [
        e["data"]["chunk"]
        for e in live_events
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "reasoning-signature"
    ]
    assert signatures == [
        {"type": "reasoning-signature", "index": 0, "signature": "sig-step-0"},
        {"type": "reasoning-signature", "index": 0, "signature": "sig-turn-2"},
    ]
    first_message = next(e for e in live_events if e["type"] == "assistant/message")
    assert first_message["data"]["message"]["content"][0] == {
        "type": "reasoning",
        "text": "The user wants the notes.",
        "signature": "sig-step-0",
    }

    # Export the session as a scenario's fixture, then replay it under the same client script.
    scenario = tmp_path / "scenario"
    export(live_sessions / live_session, scenario)
    override = json.loads((scenario / "replay.override.json").read_text())
    assert [(p["at"], p["entry"]["kind"], p["entry"].get("code")) for p in override["patches"]] == [
        (2, "throw", "stream-cut")
    ]
    assert_replayed_alike(
        tmp_path, scenario, PROMPTS, (live, live_log, live_session, live_cwd, live_responses), allow
    )

    outputs = {
        "live stdout": b"\n".join(live.stdout_lines).decode(),
        "live stderr": live.stderr,
        "live log": live_log.read_text(),
        **{f"fixture {p.name}": p.read_text() for p in scenario.iterdir()},
    }
    for where, content in outputs.items():
        assert key_pieces_in(content) == [], where
    assert "HTTP Request: POST" in live.stderr  # debug logging was on, and still no key


def test_the_anthropic_key_is_in_neither_the_servers_proc_environ_nor_what_its_commands_read(
    tmp_path: Path,
) -> None:
    cwd = tmp_path / "workspace"
    cwd.mkdir()
    show = json.dumps(
        {"command": "sh", "args": ["-c", "tr '\\0' '\\n' < /proc/$PPID/environ; echo ----; env"]}
    )
    model = FakeAnthropic([
        Sse(reply(tool_block(0, "toolu_env", "run_command", show), stop="tool_use")),
        Sse(reply(text_block(0, "Done."))),
    ])  # fmt: skip
    with model, live_server(tmp_path / "sessions", model) as server:
        server.initialize()
        session = server.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
        proc_environ = Path(f"/proc/{server.process.pid}/environ").read_bytes().decode()
        response, _ = server.exchange(
            "session/prompt",
            {"sessionId": session, "prompt": [{"type": "text", "text": "Show the env."}]},
            answer=allow,
        )
        assert server.finish() == 0
    assert response["result"] == {"stopReason": "end_turn"}
    assert [r.headers["x-api-key"] for r in model.requests] == [KEY, KEY]
    [result] = [
        block
        for message in model.requests[1].body["messages"]
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    seen = result["content"][0]["text"]
    parent, _, child = seen.partition("----")
    # Both commands ran and read an environment: the one the test gave the server.
    assert "NO_PROXY=127.0.0.1" in parent and "NO_PROXY=127.0.0.1" in child
    assert "NO_PROXY=127.0.0.1" in proc_environ
    assert key_pieces_in(proc_environ) == [] and key_pieces_in(seen) == []
    assert "ANTHROPIC_API_KEY" not in proc_environ + seen
    assert "ACP_SERVER_API_KEY_FD" not in child
    assert key_pieces_in(b"\n".join(server.stdout_lines).decode()) == []
    assert key_pieces_in(server.stderr) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider", "anthropic"], "--provider anthropic needs --model"),
        (
            ["--provider", "openai", "--model", "m", "--thinking-budget", "2048"],
            "--thinking-budget applies to --provider anthropic only",
        ),
        (
            ["--provider", "anthropic", "--model", "m", "--thinking-budget", "100"],
            "a thinking budget must be at least 1024 tokens, got 100",
        ),
        (
            ["--provider", "anthropic", "--model", "m", "--max-tokens", "2000", "--thinking-budget", "4096"],
            "a thinking budget (4096) must be less than max_tokens (2000)",
        ),
    ],
)  # fmt: skip
def test_bad_anthropic_flags_exit_2_with_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", str(tmp_path), *args],
        check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"acp-server serve: error: {message}"]
    assert done.stdout == ""
