"""What the record-then-replay tests of the live providers share (a test helper): a server run
with a live provider against its loopback server records a session, `acp-server fixture export`
makes it a scenario's fixture, and llm-replay replays it under the same client script to the same
events, transcript and responses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from acp_process import AcpProcess
from msgspec import UNSET

from acp_server.core.events import SessionContext, event_type
from acp_server.providers.registry import key_variables
from acp_server.storage.jsonl.log import read_log

Answer = Callable[[dict[str, Any]], Any]

MODEL_OPTION = re.compile(
    r'"currentValue":"(test|claude-test|llm-replay)","options":\[\{"value":"\1","name":"\1"\}\]'
)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without proxies or any provider's key, loopback unproxied, and `extra`."""
    dropped = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", *key_variables()}
    env = {k: v for k, v in os.environ.items() if k.upper() not in dropped}
    return {**env, "NO_PROXY": "127.0.0.1", **extra}


def workspace(path: Path) -> Path:
    path.mkdir()
    (path / "notes.txt").write_text("alpha\nbeta\n")
    return path


def drive(
    server: AcpProcess, cwd: Path, prompts: list[str], answer: Answer | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """The client's script: initialize, a new session, the prompts (the server's requests
    answered by `answer`). Returns the session id and each prompt's response."""
    server.initialize()
    session = server.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
    responses = []
    for prompt in prompts:
        response, _ = server.exchange(
            "session/prompt",
            {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]},
            answer=answer,
        )
        responses.append(response)
    return session, responses


def logical(path: Path, session: str, cwd: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A log's header and events with the session id and cwd replaced, times and notices left
    out."""
    contents = read_log(path)

    def scrub(value: Any) -> Any:
        raw = (
            json.dumps(msgspec.to_builtins(value))
            .replace(session, "<session>")
            .replace(str(cwd), "<workspace>")
        )
        return json.loads(raw)

    header = scrub(contents.header)
    header["createdAt"] = 0
    # A notice tells what happened to the live run's transport (a retry after a 429): a replay
    # of its model output has none. The inputs of the live server's own system prompt (its
    # settings and instruction files in `session/context`) are the live run's too: llm-replay
    # sends no prompt of its own. They are left out, the seqs after them counted again.
    kept = [
        scrub(e)
        for e in contents.events
        if event_type(e) != "session/notice" and not _server_prompt_only(e)
    ]
    renumbered = {value["seq"]: index for index, value in enumerate(kept)}
    events = []
    for value in kept:
        value.pop("time")
        value["seq"] = renumbered[value["seq"]]
        if "sourceRange" in value:
            value["sourceRange"] = [renumbered[seq] for seq in value["sourceRange"]]
        events.append(value)
    return header, events


def _server_prompt_only(event: Any) -> bool:
    """A `session/context` event that holds the server prompt's inputs alone (no client's
    system prompt)."""
    return type(event) is SessionContext and event.data.system_prompt is UNSET


def transcript(server: AcpProcess, session: str, cwd: Path) -> list[str]:
    """The server's stdout, its session and workspace as placeholders, and the model option's
    models as `<model>`: they name the provider that ran (the live model, then llm-replay)."""
    return [
        MODEL_OPTION.sub(
            '"currentValue":"<model>","options":[{"value":"<model>","name":"<model>"}]',
            line.decode().replace(session, "<session>").replace(str(cwd), "<workspace>"),
        )
        for line in server.stdout_lines
    ]


def export(session_dir: Path, scenario: Path) -> subprocess.CompletedProcess[str]:
    """`acp-server fixture export` of a recorded session, which must succeed."""
    exported = subprocess.run(
        [sys.executable, "-m", "acp_server", "fixture", "export", str(session_dir), str(scenario)],
        check=False, capture_output=True, text=True, timeout=60, env=clean_env(),
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    return exported


def assert_replayed_alike(
    tmp_path: Path,
    scenario: Path,
    prompts: list[str],
    live: tuple[AcpProcess, Path, str, Path, list[dict[str, Any]]],
    answer: Answer | None = None,
) -> None:
    """A fresh server replays `scenario` from another workspace under the same client script
    to the same log, transcript and responses as the `live` run (its process, its log, its
    session, its workspace and its responses)."""
    live_server, live_log, live_session, live_cwd, live_responses = live
    replay_cwd = workspace(tmp_path / "replay-workspace")
    replay_sessions = tmp_path / "replay-sessions"
    with AcpProcess(replay_sessions, "--replay", str(scenario), env=clean_env()) as replay:
        replay_session, replay_responses = drive(replay, replay_cwd, prompts, answer)
        assert replay.finish() == 0
    assert logical(
        replay_sessions / replay_session / "session.jsonl", replay_session, replay_cwd
    ) == logical(live_log, live_session, live_cwd)
    assert transcript(replay, replay_session, replay_cwd) == transcript(
        live_server, live_session, live_cwd
    )
    assert replay_responses == live_responses
