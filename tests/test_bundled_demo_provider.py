"""The bare server's provider (no `--replay`): the demo recording in a directory that holds the
demo's project, while the conversation follows it; the explanation of the server everywhere
else, and the honest end of a turn whose recorded step the client refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_server.core.content import TextContent
from acp_server.core.messages import AssistantTurn, ModelMessage, ToolTurn, UserTurn
from acp_server.core.stream import (
    AssistantToolCall,
    BlockEnd,
    BlockStart,
    Finish,
    StreamChunk,
    TextDelta,
)
from acp_server.providers.base import BoundSession, ModelRequest
from acp_server.providers.bundled import DEMO_PROJECT, EXPLANATION, BareServerProvider
from acp_server.providers.replay import ReplayProvider, bundled_demo_fixture

pytestmark = pytest.mark.anyio


def demo_project(directory: Path) -> Path:
    for name, content in DEMO_PROJECT.items():
        (directory / name).write_bytes(content)
    return directory


def bare(cwd: Path, *, parent: str | None = None, model_calls: int = 0) -> BareServerProvider:
    provider = BareServerProvider(0)
    provider.bind_session(
        BoundSession(
            session_id="s", parent_session_id=parent, model_calls=model_calls, cwd=str(cwd)
        )
    )
    return provider


async def call(
    provider: BareServerProvider | ReplayProvider, messages: list[ModelMessage] | None = None
) -> list[StreamChunk]:
    request = ModelRequest(session_id="s", messages=messages or [], tools=[])
    return [chunk async for chunk in provider.stream(request)]


def said(text: str) -> list[StreamChunk]:
    return [BlockStart(0, "text"), TextDelta(0, text), BlockEnd(0), Finish("stop")]


async def recording(calls: int) -> list[list[StreamChunk]]:
    """The first `calls` model calls of the demo recording, as llm-replay streams them."""
    direct = ReplayProvider.from_path(bundled_demo_fixture())
    direct.bind_session(BoundSession(session_id="s"))
    return [await call(direct) for _ in range(calls)]


async def test_the_demo_project_gets_the_demo_recording(tmp_path: Path) -> None:
    provider = bare(demo_project(tmp_path))

    assert [await call(provider), await call(provider)] == await recording(2)


async def test_a_directory_without_the_demo_project_gets_the_explanation(tmp_path: Path) -> None:
    assert await call(bare(tmp_path)) == said(EXPLANATION)


async def test_a_hello_py_of_another_content_gets_the_explanation(tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text('print("Hello, world!")\n')

    assert await call(bare(tmp_path)) == said(EXPLANATION)


async def test_a_hello_py_linked_to_the_demo_project_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    demo_project(elsewhere)
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.py").symlink_to(elsewhere / "hello.py")

    assert await call(bare(project)) == said(EXPLANATION)


async def test_a_hello_py_that_is_a_fifo_gets_the_explanation_without_blocking(
    tmp_path: Path,
) -> None:
    os.mkfifo(tmp_path / "hello.py")

    assert await call(bare(tmp_path)) == said(EXPLANATION)


async def test_a_subagent_session_gets_the_explanation(tmp_path: Path) -> None:
    assert await call(bare(demo_project(tmp_path), parent="p")) == said(EXPLANATION)


async def test_a_loaded_session_gets_the_explanation(tmp_path: Path) -> None:
    assert await call(bare(demo_project(tmp_path), model_calls=3)) == said(EXPLANATION)


async def test_a_prompt_past_the_end_of_the_recording_gets_the_explanation(
    tmp_path: Path,
) -> None:
    provider = bare(demo_project(tmp_path))
    length = len(ReplayProvider.from_path(bundled_demo_fixture()).primary.entries)
    for _ in range(length):
        await call(provider)

    assert await call(provider) == said(EXPLANATION)


REFUSED_WRITE: list[ModelMessage] = [
    UserTurn([TextContent("fix it")]),
    AssistantTurn([AssistantToolCall("call_write_1", "write_file", "{}")]),
    ToolTurn("call_write_1", [TextContent("the user rejected this tool call")], is_error=True),
]


async def test_a_refused_step_ends_the_turn_saying_so(tmp_path: Path) -> None:
    provider = bare(demo_project(tmp_path))
    await call(provider)

    assert await call(provider, REFUSED_WRITE) == said(
        "I stopped here: the last step did not go through (`write_file`: the user rejected "
        "this tool call). I did not go on with the recorded demo, so nothing after that step "
        "was done."
    )


async def test_after_a_refused_step_the_session_gets_the_explanation(tmp_path: Path) -> None:
    provider = bare(demo_project(tmp_path))
    await call(provider)
    await call(provider, REFUSED_WRITE)

    assert await call(provider, [UserTurn([TextContent("again")])]) == said(EXPLANATION)
