"""Each answer to a permission request is a `permission/decision` event, through the real server
(SPEC 1.2, 4.3): right after the call's `tool/call` and before its `tool/result`, in the step of
the call; none for a call the session had already allowed always. (The whole logs of allowed,
rejected and cancelled calls are asserted in `test_prompt_tools` and `test_prompt_cancel`.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args
from prompt_harness import DONE, FakeClient, PromptServer, decision

pytestmark = pytest.mark.process

WRITE_A = ToolUse("call_a", "write_file", args(path="a.txt", content="A"))
WRITE_B = ToolUse("call_b", "write_file", args(path="b.txt", content="B"))


@pytest.mark.parametrize("answer", ["allow_once", "allow_always", "reject_once", "cancelled"])
def test_the_answer_sits_between_the_call_and_its_result(tmp_path: Path, answer: str) -> None:
    client = FakeClient(permissions=[answer])
    scenario = Scenario([("go", [Step(calls=[WRITE_A]), DONE])])
    with PromptServer(tmp_path, scenario, client=client) as server:
        session = server.new_session()
        assert server.prompt(session, "go").stop_reason == "end_turn"
        log = server.log(session)
    types = [e["type"] for e in log]
    at = types.index("tool/call")
    assert types[at : at + 3] == ["tool/call", "permission/decision", "tool/result"]
    assert log[at + 1] == decision("call_a", answer)


def test_a_call_the_session_allowed_always_has_no_decision(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_always"])
    scenario = Scenario([("go", [Step(calls=[WRITE_A]), Step(calls=[WRITE_B]), DONE])])
    with PromptServer(tmp_path, scenario, client=client) as server:
        session = server.new_session()
        assert server.prompt(session, "go").stop_reason == "end_turn"
        log = server.log(session)
    assert [e for e in log if e["type"] == "permission/decision"] == [
        decision("call_a", "allow_always")
    ]
