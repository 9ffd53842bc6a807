"""Interop with the official TypeScript SDK (`@agentclientprotocol/sdk`), in two releases pinned
in tests/interop/ts/package.json: the current one (its client is the app API, `client()`) and
the last 1.x (its client is `ClientSideConnection`, which 2.0 removed; docs/decisions/
interop-sdk-versions.md). `tests/interop/ts/flow.mjs` drives the real server with each over
`ndJsonStream` through the same lifecycle as the Python SDK test (initialize, new, a prompt with
tool calls, a cancelled prompt; then load in a fresh process, list, close, resume, close) and
prints a JSON summary.

The packages are installed once per test session with `npm ci` (`node_packages`). Without
Node.js and npm on PATH the test is skipped (in CI it fails); CI has both.

Every frame the server wrote is validated twice: by the TypeScript SDK's own zod models inside
the script (`violations` must be empty), and here, from the script's byte-for-byte transcripts,
by the Python SDK's models, with the replay order of `session/load` checked on the raw frames.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from interop_support import (
    DEMO_TOOL_CALLS,
    HANG_TEXT,
    HELLO_AFTER,
    HELLO_BEFORE,
    PROMPT,
    build_scenario,
    check_agent_frames,
    check_replay_before_response,
)
from node_packages import CURRENT_SDK, PACKAGES, SDK_1, locked_version, node_with_packages
from surface_values import session_setup

pytestmark = pytest.mark.process


@pytest.fixture(scope="session")
def node() -> str:
    """The `node` executable, with the pinned SDKs installed beside flow.mjs."""
    return node_with_packages("the TypeScript SDK interop test")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("sdk", [CURRENT_SDK, SDK_1])
def test_typescript_sdk_client_runs_the_whole_lifecycle(
    node: str, sdk: str, tmp_path: Path
) -> None:
    fixture, workspace = build_scenario(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    config = {
        "sdk": sdk,
        "python": sys.executable,
        "sessionsDir": str(tmp_path / "sessions"),
        "fixture": str(fixture),
        "workspace": str(workspace),
        "out": str(out),
        "prompt": PROMPT,
        "hangText": HANG_TEXT,
    }
    run = subprocess.run(
        [node, "flow.mjs", json.dumps(config)],
        check=False,
        cwd=PACKAGES,
        capture_output=True,
        text=True,
        timeout=60,
    )
    server_logs = {p.name: p.read_text() for p in sorted(out.glob("*.stderr.log"))}
    assert run.returncode == 0, f"flow.mjs failed:\n{run.stderr}\nserver stderr: {server_logs}"
    summary = json.loads(run.stdout)
    assert summary["sdkVersion"] == locked_version(sdk)
    assert summary["violations"] == [], "\n".join(summary["violations"])
    for name, log in server_logs.items():
        assert "Traceback" not in log, f"{name}:\n{log}"

    assert summary["protocolVersion"] == 1 and summary["loadSessionCapability"] is True
    assert summary["agentName"] == "acp-server"
    assert (summary["firstStopReason"], summary["cancelledStopReason"]) == ("end_turn", "cancelled")

    first = summary["first"]
    hello = str(workspace / "hello.py")
    assert first["exitCode"] == 0
    assert first["clientRequests"] == [
        ["fs/read_text_file", hello],
        ["session/request_permission", "call_write_1"],
        ["fs/read_text_file", hello],
        ["fs/write_text_file", hello],
        ["session/request_permission", "call_run_1"],
    ]
    assert first["fileAfter"] == HELLO_AFTER
    assert (workspace / "hello.py").read_text() == HELLO_BEFORE  # the client's fs was used
    assert [tuple(call) for call in first["toolCalls"]] == DEMO_TOOL_CALLS
    assert set(first["finalStatuses"].values()) == {"completed"}
    assert first["text"].endswith(HANG_TEXT)

    second = summary["second"]
    assert second["exitCode"] == 0
    assert second["loadResult"] == session_setup()
    assert second["replayed"] > 0 and second["replayedAfterResponse"] == 0
    assert second["userTexts"] == [PROMPT, "Check it again."]
    assert [tuple(call) for call in second["toolCalls"]] == DEMO_TOOL_CALLS
    assert set(second["finalStatuses"].values()) == {"completed"}
    assert second["text"] == first["text"]
    assert second["listed"] == [summary["sessionId"]]
    assert second["clientRequests"] == []

    # The raw transcripts, through the Python SDK's models too.
    for name in ("first", "second"):
        frames = _jsonl(out / f"{name}.stdout.jsonl")
        sent = _jsonl(out / f"{name}.stdin.jsonl")
        methods_by_id = {m["id"]: m["method"] for m in sent if "method" in m and "id" in m}
        check_agent_frames(frames, methods_by_id)
        answered = {f["id"] for f in frames if "method" not in f}
        assert answered == set(methods_by_id), (
            f"{name}: a request went unanswered, or an answer was unasked"
        )
    (load_id,) = [i for i, m in methods_by_id.items() if m == "session/load"]
    replayed = check_replay_before_response(frames, load_id, summary["sessionId"])
    assert len(replayed) == second["replayed"]
