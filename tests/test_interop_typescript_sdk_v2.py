"""Interop with the TypeScript SDK 2.4.0's ACP v2 client (`@agentclientprotocol/sdk/experimental/v2`).

`tests/interop/ts/v2flow.mjs` drives the real server over v2: initialize, session/new, a prompt
(its `messageId` receipt, then the turn until idle `end_turn`), a prompt whose model call hangs
until `session/cancel` (idle `cancelled`), session/close; then, in a fresh process,
session/resume from the start, from a message (`_after_message`) and without `replayFrom`, and
session/close. It validates every frame the server wrote with the SDK's v2 zod models
(`violations` must be empty) and prints a JSON summary, held here to exact values.

The fixture: one recorded answer, then a model call that streams `HANG_TEXT` and waits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, write_fixture
from node_packages import CURRENT_SDK, PACKAGES, locked_version, node_with_packages

pytestmark = pytest.mark.process

PROMPT = "Say hello."
ANSWER = "Hello! What shall we work on?"
HANG_PROMPT = "Now something long."
HANG_TEXT = "Let me think about that"


@pytest.fixture(scope="session")
def node() -> str:
    """The `node` executable, with the pinned SDK installed beside v2flow.mjs."""
    return node_with_packages("the TypeScript SDK v2 interop test")


def run_flow(node: str, tmp_path: Path) -> dict[str, Any]:
    hang = {
        "kind": "hang",
        "chunks": [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": HANG_TEXT},
        ],
    }
    scenario = Scenario(
        [(PROMPT, [Step(text=ANSWER)]), (HANG_PROMPT, [Step(text="(never streamed)")])],
        override={"patches": [{"at": 1, "entry": hang}]},
    )
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    config = {
        "python": sys.executable,
        "sessionsDir": str(tmp_path / "sessions"),
        "fixture": str(write_fixture(tmp_path / "fixture", scenario)),
        "workspace": str(workspace),
        "out": str(out),
        "prompt": PROMPT,
        "hangPrompt": HANG_PROMPT,
        "hangText": HANG_TEXT,
    }
    run = subprocess.run(
        [node, "v2flow.mjs", json.dumps(config)],
        check=False,
        cwd=PACKAGES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    logs = {p.name: p.read_text() for p in sorted(out.glob("*.stderr.log"))}
    assert run.returncode == 0, f"v2flow.mjs failed:\n{run.stderr}\nserver stderr: {logs}"
    summary: dict[str, Any] = json.loads(run.stdout)
    return summary


def test_typescript_sdk_v2_client_runs_new_prompt_cancel_resume_and_close(
    node: str, tmp_path: Path
) -> None:
    summary = run_flow(node, tmp_path)
    assert summary["violations"] == []
    assert summary["sdkVersion"] == locked_version(CURRENT_SDK)
    live = summary["live"]
    assert (live["exitCode"], live["protocolVersion"], live["agentName"]) == (0, 2, "acp-server")
    assert live["history"] == {
        "page": "session.page",
        "follow": "session.follow",
        "search": "session.search",
    }
    first, second = live["receipts"]
    assert first != second
    assert live["firstStates"] == [["running", None], ["idle", "end_turn"]]
    assert live["secondStates"] == [["running", None], ["idle", "cancelled"]]
    assert live["cancelledStopReason"] == "cancelled"
    assert live["permissions"] == []
    assert live["closed"] == {}

    # Live: each prompt echoed under its receipt's id, each answer under an id of its own.
    users = [m for m in live["messages"] if m[0] == "user_message"]
    assert users == [["user_message", first, PROMPT], ["user_message", second, HANG_PROMPT]]
    answers: dict[str, str] = {}
    for kind, message_id, text in live["messages"]:
        if kind == "agent_message_chunk":
            answers[message_id] = answers.get(message_id, "") + text
    assert list(answers.values()) == [ANSWER, HANG_TEXT]
    answer_ids = list(answers)
    assert not {first, second} & set(answer_ids)

    # Resumed in a fresh process: whole messages with the live ids, in order.
    history = [
        ["user_message", first, PROMPT],
        ["agent_message", answer_ids[0], ANSWER],
        ["user_message", second, HANG_PROMPT],
        ["agent_message", answer_ids[1], HANG_TEXT],
    ]
    resumed = summary["resumed"]
    assert resumed["exitCode"] == 0
    assert resumed["fromStart"]["messages"] == history
    assert resumed["fromMessage"]["messages"] == history[1:]
    assert resumed["plain"]["messages"] == []
    for replay in ("fromStart", "fromMessage", "plain"):
        assert resumed[replay]["states"] == [["idle", "cancelled"]], resumed
    assert resumed["afterAnswers"] == []
    assert resumed["closed"] == {}
