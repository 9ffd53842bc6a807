"""A bare `acp-server serve` (no `--replay`, no live provider) over the wire: the demo recording
plays only in the demo's project and only while the client lets it, and anywhere else each
prompt is answered with what the server is and how to give it a model."""

from __future__ import annotations

from pathlib import Path

import pytest
from prompt_harness import PromptServer

from acp_server.providers.bundled import DEMO_PROJECT, EXPLANATION

pytestmark = pytest.mark.process

DEMO_PROMPT = "Fix the greeting in hello.py."


def test_every_prompt_outside_the_demo_project_is_answered_with_the_explanation(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, None) as server:
        session = server.new_session()
        first = server.prompt(session, "Add a test for the parser.")
        second = server.prompt(session, "And another one.")

        assert (first.stop_reason, first.text()) == ("end_turn", EXPLANATION)
        assert (second.stop_reason, second.text()) == ("end_turn", EXPLANATION)
        assert server.client.requests == []  # no tool was called, no file touched
        assert list(server.workspace.iterdir()) == []


def test_a_rejected_write_in_the_demo_project_ends_the_turn_saying_so(tmp_path: Path) -> None:
    with PromptServer(tmp_path, None) as server:
        for name, content in DEMO_PROJECT.items():
            (server.workspace / name).write_bytes(content)
        server.client.permissions.append("reject_once")
        session = server.new_session()
        answered = server.prompt(session, DEMO_PROMPT)
        after = server.prompt(session, "Why not?")

        asked = [r["params"]["toolCall"]["toolCallId"] for r in server.client.requests]
        assert asked == ["call_write_1"]  # the run that follows the write was never asked for
        assert answered.stop_reason == "end_turn"
        assert answered.text().endswith(
            "I stopped here: the last step did not go through (`write_file`: the user rejected "
            "this tool call). I did not go on with the recorded demo, so nothing after that "
            "step was done."
        )
        assert (server.workspace / "hello.py").read_bytes() == DEMO_PROJECT["hello.py"]
        assert after.text() == EXPLANATION
