"""`/rewind` through the real server: three turns change three files (a write over a file, an
edit and a new file, an edit again), and `/rewind 2` puts each back exactly as it was before
message 2, asking first; a file changed behind the agent's back is named and left alone, or
restored when the second request allows it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step, ToolUse, args
from openai_server import FakeOpenAI, Sse, chunk, text
from prompt_harness import DONE, FakeClient, PromptServer

pytestmark = pytest.mark.process

SCENARIO = Scenario(
    [
        (
            "first",
            [Step(calls=[ToolUse("w1", "write_file", args(path="a.txt", content="A1\n"))]), DONE],
        ),
        (
            "second",
            [
                Step(
                    calls=[
                        ToolUse(
                            "e1", "edit_file", args(path="b.txt", oldText="beta", newText="B2")
                        ),
                        ToolUse("w2", "write_file", args(path="new/c.txt", content="C2\n")),
                    ]
                ),
                DONE,
            ],
        ),
        (
            "third",
            [
                Step(
                    calls=[
                        ToolUse("e2", "edit_file", args(path="a.txt", oldText="A1", newText="A3"))
                    ]
                ),
                DONE,
            ],
        ),
    ]
)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def three_turns(server: PromptServer) -> str:
    (server.workspace / "a.txt").write_text("alpha\n")
    (server.workspace / "b.txt").write_text("beta\n")
    session = server.new_session()
    for words in ("first", "second", "third"):
        assert server.prompt(session, words).stop_reason == "end_turn"
    assert files(server) == {"a.txt": "A3\n", "b.txt": "B2\n", "new/c.txt": "C2\n"}
    return session


def files(server: PromptServer) -> dict[str, str]:
    root = server.workspace
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def rewinds(server: PromptServer, session: str) -> list[dict[str, Any]]:
    return [e["data"] for e in server.log(session) if e["type"] == "session/rewind"]


def titles(requests: list[dict[str, Any]]) -> list[str]:
    return [r["params"]["toolCall"]["title"] for r in requests]


def test_rewind_lists_the_messages_numbered_from_1(tmp_path: Path) -> None:
    with PromptServer(tmp_path, SCENARIO, "--mode", "full-access") as server:
        session = three_turns(server)
        answered = server.prompt(session, "/rewind")
        assert answered.text() == (
            "Messages to rewind to (`/rewind N` restores the files as they were before N):\n"
            "1. first\n2. second\n3. third"
        )
        assert answered.requests == []
        refused = server.prompt(session, "/rewind 4")
        assert (refused.text(), refused.requests) == (
            "Usage: /rewind [N], N a message's number from 1 to 3",
            [],
        )


def test_rewind_2_restores_every_file_exactly_after_asking(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, SCENARIO, "--mode", "full-access", client=client) as server:
        session = three_turns(server)
        answered = server.prompt(session, "/rewind 2")
        assert titles(answered.requests) == [
            "Rewind to message 2 (second); restore <cwd>/b.txt, <cwd>/a.txt; remove <cwd>/new/c.txt"
        ]
        assert files(server) == {"a.txt": "A1\n", "b.txt": "beta\n"}
        assert answered.text() == (
            "Rewound to message 2: second\n"
            "Restored: <cwd>/b.txt, <cwd>/a.txt\n"
            "Removed (created after that message): <cwd>/new/c.txt"
        )
        assert rewinds(server, session) == [
            {
                "toMessageId": "user-1",
                "restored": [
                    {"path": "<cwd>/b.txt", "sha256": sha256("beta\n")},
                    {"path": "<cwd>/new/c.txt", "sha256": None},
                    {"path": "<cwd>/a.txt", "sha256": sha256("A1\n")},
                ],
                "skipped": [],
            }
        ]
        assert server.prompt(session, "/rewind").text().endswith("\n1. first")


def test_rewind_1_restores_the_files_as_they_were_before_the_session(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, SCENARIO, "--mode", "full-access", client=client) as server:
        session = three_turns(server)
        server.prompt(session, "/rewind 1")
        assert files(server) == {"a.txt": "alpha\n", "b.txt": "beta\n"}


def test_a_rejected_rewind_changes_nothing(tmp_path: Path) -> None:
    client = FakeClient(permissions=["reject_once"])
    with PromptServer(tmp_path, SCENARIO, "--mode", "full-access", client=client) as server:
        session = three_turns(server)
        answered = server.prompt(session, "/rewind 2")
        assert answered.text() == "Rewind cancelled: nothing was changed."
        assert files(server) == {"a.txt": "A3\n", "b.txt": "B2\n", "new/c.txt": "C2\n"}
        assert rewinds(server, session) == []


def test_a_file_changed_behind_the_agent_is_named_and_left_alone(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once", "reject_once"])
    with PromptServer(tmp_path, SCENARIO, "--mode", "full-access", client=client) as server:
        session = three_turns(server)
        (server.workspace / "new/c.txt").write_text("mine now\n")
        answered = server.prompt(session, "/rewind 2")
        assert titles(answered.requests) == [
            "Rewind to message 2 (second); restore <cwd>/b.txt, <cwd>/a.txt; 1 file changed "
            "outside the agent left alone unless allowed next",
            "Also restore files changed outside the agent since it last wrote them: "
            "<cwd>/new/c.txt",
        ]
        assert files(server) == {"a.txt": "A1\n", "b.txt": "beta\n", "new/c.txt": "mine now\n"}
        assert answered.text() == (
            "Rewound to message 2: second\n"
            "Restored: <cwd>/b.txt, <cwd>/a.txt\n"
            "Left alone (changed outside the agent): <cwd>/new/c.txt"
        )
        assert rewinds(server, session)[0]["skipped"] == ["<cwd>/new/c.txt"]


def test_a_file_changed_behind_the_agent_is_restored_when_the_second_request_allows_it(
    tmp_path: Path,
) -> None:
    client = FakeClient(permissions=["allow_once", "allow_once"])
    with PromptServer(tmp_path, SCENARIO, "--mode", "full-access", client=client) as server:
        session = three_turns(server)
        (server.workspace / "a.txt").write_text("mine now\n")
        server.prompt(session, "/rewind 2")
        assert files(server) == {"a.txt": "A1\n", "b.txt": "beta\n"}
        assert rewinds(server, session)[0]["skipped"] == []


def test_a_rewind_restores_from_a_sqlite_store(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    store = f"sqlite://{tmp_path}/sessions.db"
    with PromptServer(
        tmp_path, SCENARIO, "--mode", "full-access", client=client, store=store
    ) as server:
        session = three_turns(server)
        server.prompt(session, "/rewind 1")
        assert files(server) == {"a.txt": "alpha\n", "b.txt": "beta\n"}


def test_the_model_is_no_longer_sent_the_rewound_turns(tmp_path: Path) -> None:
    answers = [Sse([text(f"Answer {n}."), chunk(finish="stop")]) for n in (1, 2, 3)]
    model = FakeOpenAI(answers)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # No title call: the model's requests are the conversation's alone.
    flags = ["--provider", "openai", "--model", "test", "--titles", "off", "--base-url"]
    with model, AcpProcess(tmp_path / "sessions", *flags, model.base_url) as server:
        server.initialize()
        session = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})
        for words in ("one", "two", "/rewind 2", "three"):
            server.exchange(
                "session/prompt",
                {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": words}]},
                answer=lambda frame: {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
            )
        assert server.finish() == 0
    sent = [(m["role"], m["content"]) for m in model.requests[2].body["messages"]]
    assert [(role, content) for role, content in sent if role != "system"] == [
        ("user", "one"),
        ("assistant", "Answer 1."),
        ("user", "three"),
    ]
