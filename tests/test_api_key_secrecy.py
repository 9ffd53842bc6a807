"""The API key of `--provider openai` stays with the server, through real processes.

The server runs against a loopback OpenAI-compatible server (tests/openai_server.py) with the
key in its environment. The key is sent in the Authorization header, and nowhere else: not in
the server's own `/proc/<pid>/environ`, not in what the programs the model runs can see (their
environment, their parent's), and not in what a failing provider reports (the error frame, the
log, stderr), whichever field of the provider's error carries it and wherever it falls against
the point where a long message is cut.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from openai_server import FakeOpenAI, Sse, Status, call, chunk, text

from acp_server.providers.credentials import KeyName, store_key
from acp_server.providers.secret import KEY_FD_ENV, Secret, take_handed_over

KEY = "sk-9f3Qz7LmXw2Vb8Np4Rt6Yh1Kd5Gs0JcUe"
"""No 8 characters of it in a row appear anywhere by chance."""
OTHER_KEY = "sk-ant-Zq8Lw3Xv5Bn7Mk1Pj9Hd2Gf4Sc6Ty0Ru"
"""Another provider's key, stored or in the environment of a server that does not use it."""

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc/<pid>/environ is Linux's"
)


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.upper() not in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "OPENAI_API_KEY")
    }
    return {**env, "NO_PROXY": "127.0.0.1", **extra}


def key_pieces_in(text: str) -> list[str]:
    """Every 8 characters of the key in a row that occur in `text`."""
    return sorted({KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text})


def other_key_pieces_in(text: str) -> list[str]:
    """Every 8 characters of `OTHER_KEY` past its `sk-ant-` that occur in `text`."""
    tail = OTHER_KEY[7:]
    return sorted({tail[i : i + 8] for i in range(len(tail) - 7) if tail[i : i + 8] in text})


def allow(frame: dict[str, Any]) -> Any:
    assert frame["method"] == "session/request_permission", frame
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def prompt(server: AcpProcess, session: str, words: str) -> dict[str, Any]:
    response, _ = server.exchange(
        "session/prompt",
        {"sessionId": session, "prompt": [{"type": "text", "text": words}]},
        answer=allow,
    )
    return response


def live_server(sessions: Path, model: FakeOpenAI, **extra: str) -> AcpProcess:
    return AcpProcess(
        sessions,
        "--provider", "openai", "--model", "test", "--titles", "off", "--base-url", model.base_url,
        "--max-retries", "0", "--log-level", "debug",
        env=clean_env(OPENAI_API_KEY=KEY, **extra),
    )  # fmt: skip


def run_command(index: int, id: str, command: str, *args: str) -> dict[str, Any]:
    arguments = json.dumps({"command": command, "args": list(args)})
    return call(index, id=id, name="run_command", arguments=arguments)


def test_the_handed_over_key_is_read_once_its_descriptor_closed_and_its_variable_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, KEY.encode())
    os.close(write_end)
    monkeypatch.setenv(KEY_FD_ENV, str(read_end))
    key = take_handed_over()
    assert key is not None and key.reveal() == KEY and KEY not in repr(key)
    assert KEY_FD_ENV not in os.environ
    with pytest.raises(OSError):
        os.fstat(read_end)
    assert take_handed_over() is None


@pytest.mark.process
def test_the_key_is_in_neither_the_servers_proc_environ_nor_what_its_commands_read(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    tools = Sse([
        run_command(0, "call_parent", "sh", "-c", "tr '\\0' '\\n' < /proc/$PPID/environ"),
        run_command(1, "call_env", "env"),
        chunk(finish="tool_calls"),
    ])  # fmt: skip
    model = FakeOpenAI([tools, Sse([text("Done."), chunk(finish="stop")])])
    with model, live_server(tmp_path / "sessions", model) as server:
        server.initialize()
        session = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})
        proc_environ = Path(f"/proc/{server.process.pid}/environ").read_bytes().decode()
        response = prompt(server, session["sessionId"], "Show me the environment.")
        assert server.finish() == 0
    assert response["result"] == {"stopReason": "end_turn"}
    assert [r.headers["Authorization"] for r in model.requests] == [f"Bearer {KEY}"] * 2
    tool_results = {
        m["tool_call_id"]: m["content"]
        for m in model.requests[1].body["messages"]
        if m["role"] == "tool"
    }
    parent, child = tool_results["call_parent"], tool_results["call_env"]
    # Both commands ran and read an environment: the one the test gave the server.
    assert "NO_PROXY=127.0.0.1" in parent and "NO_PROXY=127.0.0.1" in child
    assert "NO_PROXY=127.0.0.1" in proc_environ
    assert key_pieces_in(proc_environ) == []
    assert key_pieces_in(parent) == [] and key_pieces_in(child) == []
    assert "OPENAI_API_KEY" not in proc_environ + parent + child
    assert "ACP_SERVER_API_KEY_FD" not in child
    assert key_pieces_in(b"\n".join(server.stdout_lines).decode()) == []
    assert key_pieces_in(server.stderr) == []


@pytest.mark.process
def test_the_held_key_is_scrubbed_from_every_tool_result_before_it_is_logged_or_sent(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "leak.txt").write_text(f"key={KEY}\n")
    read = json.dumps({"path": "leak.txt"})
    tools = Sse([
        run_command(0, "call_cat", "cat", "leak.txt"),
        call(1, id="call_read", name="read_file", arguments=read),
        chunk(finish="tool_calls"),
    ])  # fmt: skip
    model = FakeOpenAI([tools, Sse([text("Done."), chunk(finish="stop")])])
    with model, live_server(tmp_path / "sessions", model) as server:
        server.initialize()
        session = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})
        response = prompt(server, session["sessionId"], "Show me leak.txt.")
        assert server.finish() == 0
    assert response["result"] == {"stopReason": "end_turn"}
    tool_results = {
        m["tool_call_id"]: m["content"]
        for m in model.requests[1].body["messages"]
        if m["role"] == "tool"
    }
    assert tool_results == {
        "call_cat": "key=[redacted]\n[exit code 0]",
        "call_read": "key=[redacted]\n",
    }
    log = (tmp_path / "sessions" / session["sessionId"] / "session.jsonl").read_text()
    assert log.count("key=[redacted]") == 2
    assert key_pieces_in(log) == []
    assert key_pieces_in(b"\n".join(server.stdout_lines).decode()) == []
    assert key_pieces_in(server.stderr) == []


@pytest.mark.process
def test_every_stored_key_is_scrubbed_from_a_command_that_prints_the_credentials_file(
    tmp_path: Path,
) -> None:
    """A command is not confined as the file tools are: it can print the stored credentials,
    which hold the keys of providers the server does not use. Each of them is scrubbed too."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    stored = tmp_path / "config" / "credentials.json"
    store_key(Secret(OTHER_KEY), KeyName("anthropic"), stored)
    store_key(Secret(KEY), KeyName("openai"), stored)
    tools = Sse([run_command(0, "call_cat", "cat", str(stored)), chunk(finish="tool_calls")])
    model = FakeOpenAI([tools, Sse([text("Done."), chunk(finish="stop")])])
    config = {"ACP_SERVER_CONFIG_DIR": str(stored.parent)}
    with model, live_server(tmp_path / "sessions", model, **config) as server:
        server.initialize()
        session = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})
        response = prompt(server, session["sessionId"], "Show me the stored keys.")
        assert server.finish() == 0
    assert response["result"] == {"stopReason": "end_turn"}
    shown = (
        '{"keys": [{"provider": "anthropic", "apiKey": "[redacted]"}, '
        '{"provider": "openai", "apiKey": "[redacted]"}]}\n[exit code 0]'
    )
    [sent] = [m["content"] for m in model.requests[1].body["messages"] if m["role"] == "tool"]
    assert sent == shown
    log = (tmp_path / "sessions" / session["sessionId"] / "session.jsonl").read_text()
    wire = b"\n".join(server.stdout_lines).decode()
    assert json.dumps(shown)[1:-1] in log and json.dumps(shown)[1:-1] in wire
    for written in (log, wire, server.stderr):
        assert key_pieces_in(written) == [] and other_key_pieces_in(written) == []


@pytest.mark.process
def test_a_file_holding_the_key_is_changed_without_a_checkpoint(tmp_path: Path) -> None:
    """The store keeps what a file held before a tool changed it, for `/rewind`; a content
    holding the key is not kept: the store, like the log, never holds it."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "leak.txt").write_text(f"key={KEY}\n")
    write = json.dumps({"path": "leak.txt", "content": "no key here\n"})
    tools = Sse(
        [call(0, id="call_write", name="write_file", arguments=write), chunk(finish="tool_calls")]
    )
    model = FakeOpenAI([tools, Sse([text("Done."), chunk(finish="stop")])])
    with model, live_server(tmp_path / "sessions", model) as server:
        server.initialize()
        session = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})
        response = prompt(server, session["sessionId"], "Clean leak.txt.")
        assert server.finish() == 0
    assert response["result"] == {"stopReason": "end_turn"}
    assert (workspace / "leak.txt").read_text() == "no key here\n"
    directory = tmp_path / "sessions" / session["sessionId"]
    records = [json.loads(line) for line in (directory / "session.jsonl").read_text().splitlines()]
    results = [r["data"] for r in records if r.get("type") == "tool/result"]
    assert [("checkpoints" in data, data["callId"]) for data in results] == [(False, "call_write")]
    assert not (directory / "blobs").exists()


@pytest.mark.process
@pytest.mark.parametrize(
    "provider",
    [
        ["--provider", "openai", "--model", "test", "--base-url", "http://127.0.0.1:9/v1"],
        [],  # llm-replay, which takes no key at all
    ],
    ids=["openai", "llm-replay"],
)
def test_no_providers_key_stays_in_the_servers_proc_environ(
    tmp_path: Path, provider: list[str]
) -> None:
    env = clean_env(OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=OTHER_KEY)
    with AcpProcess(tmp_path / "sessions", *provider, env=env) as server:
        server.initialize()
        proc_environ = Path(f"/proc/{server.process.pid}/environ").read_bytes().decode()
        assert server.finish() == 0
    assert "NO_PROXY=127.0.0.1" in proc_environ
    assert key_pieces_in(proc_environ) == []
    assert [n for n in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY") if n in proc_environ] == []
    assert OTHER_KEY not in proc_environ


EVERY_FIELD = {"message": KEY, "code": KEY, "type": KEY, "param": KEY}


@pytest.mark.process
def test_no_part_of_the_key_leaves_through_a_providers_error_whichever_field_carries_it(
    tmp_path: Path,
) -> None:
    failures = [
        Status(401, {"error": EVERY_FIELD}),
        Status(400, {"error": {"message": "x" * 495 + KEY, "code": KEY}}),
        Status(500, "z" * 190 + KEY),
        Status(200, {"error": EVERY_FIELD}),
        Sse([{"error": EVERY_FIELD}]),
        Sse([{"error": {"type": KEY}}]),
        Sse([{"error": {"message": "y" * 495 + KEY, "code": "c" * 95 + KEY}}]),
        Sse(["x" * 191 + KEY]),
    ]
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    model = FakeOpenAI(failures)
    with model, live_server(tmp_path / "sessions", model) as server:
        server.initialize()
        session = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})
        errors = [
            prompt(server, session["sessionId"], f"Try {i}.")["error"]["data"]
            for i in range(len(failures))
        ]
        assert server.finish() == 0
    url = f"{model.base_url}/chat/completions"
    assert errors == [
        {"message": f"openai: HTTP 401 Unauthorized from {url}: [redacted]", "code": 401},
        {
            "message": f"openai: HTTP 400 Bad Request from {url}: {'x' * 495}[reda...",
            "code": 400,
        },
        {
            "message": f"openai: HTTP 500 Internal Server Error from {url}: "
            + repr('"' + "z" * 190 + "[redacted..."),
            "code": 500,
        },
        {"message": "openai: the server answered with an error: [redacted]", "code": "[redacted]"},
        {
            "message": "openai: the server reported an error mid-stream: [redacted]",
            "code": "[redacted]",
        },
        {
            "message": "openai: the server reported an error mid-stream: [redacted]",
            "code": "stream-error",
        },
        {
            "message": f"openai: the server reported an error mid-stream: {'y' * 495}[reda...",
            "code": "c" * 95 + "[reda...",
        },
        {
            "message": "openai: malformed server-sent event 1 (JSON is malformed: invalid "
            "character (byte 0)): " + repr("x" * 191 + "[redacted..."),
            "code": "malformed-event",
        },
    ]
    log = (tmp_path / "sessions" / session["sessionId"] / "session.jsonl").read_text()
    assert log.count('"type":"turn/end"') == len(failures)
    assert key_pieces_in(log) == []
    assert key_pieces_in(b"\n".join(server.stdout_lines).decode()) == []
    assert key_pieces_in(server.stderr) == []
