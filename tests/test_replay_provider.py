"""The llm-replay provider (SPEC 5): recorded streams served per session from fixture files.

Each top-level session replays the primary script from its start (or from the entry after the
model calls its log already holds); subagent children replay `session.N.jsonl` in first-call
order; `throw` and `hang` entries fail or wait; `assert_consumed` reports unused calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from polling import wait_for

from acp_server.core.content import TextContent
from acp_server.core.messages import AssistantTurn, UserTurn
from acp_server.core.replay_script import ChunksEntry, HangEntry, ReplayError, ThrowEntry
from acp_server.core.stream import AssistantText, Finish, StreamChunk, TextDelta
from acp_server.providers.base import BoundSession, ModelRequest, ProviderError, request_text
from acp_server.providers.replay import ReplayProvider


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


HEADER = {"type": "session", "version": 2, "id": "s1", "createdAt": 0, "cwd": "/work"}


def call(turn: int, step: int, text: str, reason: str = "stop") -> list[dict[str, Any]]:
    """The projected records of one recorded model call: a text delta and a finish."""
    return [
        {"type": "step/start", "data": {"turn": turn, "step": step}},
        {
            "type": "assistant/chunk",
            "data": {
                "turn": turn,
                "step": step,
                "chunk": {"type": "text-delta", "index": 0, "text": text},
            },
        },
        {
            "type": "assistant/chunk",
            "data": {"turn": turn, "step": step, "chunk": {"type": "finish", "reason": reason}},
        },
        {"type": "step/end", "data": {"turn": turn, "step": step}},
    ]


def failed_call(turn: int, step: int, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "step/start", "data": {"turn": turn, "step": step}},
        {
            "type": "assistant/chunk",
            "data": {
                "turn": turn,
                "step": step,
                "chunk": {"type": "text-delta", "index": 0, "text": text},
            },
        },
        {"type": "step/end", "data": {"turn": turn, "step": step}},
    ]


def write_fixture(path: Path, *calls: list[dict[str, Any]]) -> Path:
    records = [HEADER] + [r for c in calls for r in c]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def script_of(tmp_path: Path, *texts: str) -> Path:
    """A fixture at tmp_path/session.jsonl with one model call per text, in turn 0."""
    return write_fixture(tmp_path / "session.jsonl", *(call(0, i, t) for i, t in enumerate(texts)))


def request(session_id: str, text: str = "hello") -> ModelRequest:
    return ModelRequest(session_id=session_id, messages=[UserTurn([TextContent(text)])], tools=[])


async def collect(
    provider: ReplayProvider, session_id: str, text: str = "hello"
) -> list[StreamChunk]:
    return [c async for c in provider.stream(request(session_id, text))]


def said(text: str) -> list[StreamChunk]:
    return [TextDelta(0, text), Finish("stop")]


def bind(
    provider: ReplayProvider,
    session_id: str,
    *,
    parent: str | None = None,
    model_calls: int = 0,
    cwd: Path | None = None,
) -> None:
    provider.bind_session(
        BoundSession(
            session_id=session_id,
            parent_session_id=parent,
            model_calls=model_calls,
            cwd=str(cwd) if cwd else None,
        )
    )


# ---------------------------------------------------------------------------------------------
# Loading.


def test_from_path_accepts_the_fixture_file_or_its_directory(tmp_path: Path) -> None:
    fixture = script_of(tmp_path, "one")

    assert (
        ReplayProvider.from_path(fixture).primary.entries
        == ReplayProvider.from_path(tmp_path).primary.entries
    )
    assert ReplayProvider.from_path(tmp_path).primary.name == str(fixture)


def test_from_path_without_a_fixture_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ReplayError) as exc:
        ReplayProvider.from_path(tmp_path)

    assert str(exc.value) == f"{tmp_path / 'session.jsonl'}: no such fixture"


def test_making_the_provider_does_not_read_the_fixture(tmp_path: Path) -> None:
    (tmp_path / "session.jsonl").write_bytes(b"not a fixture\n")

    assert ReplayProvider.from_path(tmp_path).name == "llm-replay"


@pytest.mark.anyio
async def test_a_fixture_with_a_failed_stream_and_no_override_fails_the_first_model_call(
    tmp_path: Path,
) -> None:
    write_fixture(tmp_path / "session.jsonl", call(0, 0, "one"), failed_call(1, 0, "par"))
    provider = ReplayProvider.from_path(tmp_path)
    bind(provider, "a")

    with pytest.raises(ProviderError) as exc:
        await collect(provider, "a")

    assert exc.value.message == (
        f"llm-replay: {tmp_path / 'session.jsonl'}: script entry 1 (turn 1, step 0) has no "
        "finish chunk: it is a failed stream, so the scenario must say what happened in an "
        "override (a `throw` or `hang` entry patched at that index)"
    )


@pytest.mark.anyio
async def test_an_override_past_the_end_of_the_fixture_fails_the_first_model_call(
    tmp_path: Path,
) -> None:
    write_fixture(tmp_path / "session.jsonl", call(0, 0, "one"))
    patch = {"patches": [{"at": 9, "entry": {"kind": "chunks", "chunks": []}}]}
    (tmp_path / "replay.override.json").write_text(json.dumps(patch))
    provider = ReplayProvider.from_path(tmp_path)
    bind(provider, "a")

    with pytest.raises(ProviderError, match=r"^llm-replay: .*session\.jsonl: "):
        await collect(provider, "a")


def test_override_sidecar_beside_the_fixture_is_applied(tmp_path: Path) -> None:
    write_fixture(tmp_path / "session.jsonl", call(0, 0, "one"), failed_call(1, 0, "par"))
    (tmp_path / "replay.override.json").write_text(
        json.dumps(
            {
                "patches": [
                    {"at": 1, "entry": {"kind": "throw", "chunks": [], "message": "overloaded"}}
                ]
            }
        )
    )

    provider = ReplayProvider.from_path(tmp_path)

    assert provider.primary.entries == [ChunksEntry(said("one")), ThrowEntry([], "overloaded")]


def test_explicit_override_path_takes_the_place_of_the_sidecar(tmp_path: Path) -> None:
    script_of(tmp_path, "one")
    (tmp_path / "replay.override.json").write_text("not even json")
    explicit = tmp_path / "other.json"
    explicit.write_text(json.dumps([{"kind": "hang"}, {"kind": "hang"}]))

    provider = ReplayProvider.from_path(tmp_path, override=explicit)

    assert provider.primary.entries == [HangEntry(), HangEntry()]


def test_explicit_override_path_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    write_fixture(tmp_path / "session.jsonl", failed_call(0, 0, "par"))

    with pytest.raises(ReplayError) as exc:
        ReplayProvider.from_path(tmp_path, override=tmp_path / "missing.json")

    assert str(exc.value) == f"{tmp_path / 'missing.json'}: no such override file"


def test_missing_first_child_fixture_is_an_error(tmp_path: Path) -> None:
    script_of(tmp_path, "one")
    write_fixture(tmp_path / "session.2.jsonl", call(0, 0, "child"))

    with pytest.raises(ReplayError) as exc:
        ReplayProvider.from_path(tmp_path)

    assert str(exc.value) == f"{tmp_path}: child fixture session.1.jsonl is missing"


# ---------------------------------------------------------------------------------------------
# Per-session cursors.


@pytest.mark.anyio
async def test_each_top_level_session_replays_the_script_from_its_start(tmp_path: Path) -> None:
    provider = ReplayProvider.from_path(script_of(tmp_path, "one", "two"))
    bind(provider, "a")
    bind(provider, "b")

    assert await collect(provider, "a") == said("one")
    assert await collect(provider, "b") == said("one")
    assert await collect(provider, "a") == said("two")
    assert await collect(provider, "b") == said("two")


@pytest.mark.anyio
async def test_session_bound_with_model_calls_resumes_at_that_entry(tmp_path: Path) -> None:
    provider = ReplayProvider.from_path(script_of(tmp_path, "one", "two", "three"))
    bind(provider, "loaded", model_calls=2)

    assert await collect(provider, "loaded") == said("three")


@pytest.mark.anyio
async def test_stream_for_an_unbound_session_is_an_error(tmp_path: Path) -> None:
    provider = ReplayProvider.from_path(script_of(tmp_path, "one"))

    with pytest.raises(ProviderError) as exc:
        await collect(provider, "stranger")

    assert exc.value.message == "llm-replay: session stranger was never bound"


@pytest.mark.anyio
async def test_asking_past_the_end_of_the_script_names_the_call(tmp_path: Path) -> None:
    fixture = script_of(tmp_path, "one")
    provider = ReplayProvider.from_path(fixture)
    bind(provider, "a")
    await collect(provider, "a")

    with pytest.raises(ProviderError) as exc:
        await collect(provider, "a")

    assert (
        str(exc.value)
        == f"llm-replay: session a asked for script entry 1, but {fixture} holds only 1 model calls "
        "(entries 0 to 0): the script is exhausted"
    )


@pytest.mark.anyio
async def test_pacing_still_streams_every_chunk(tmp_path: Path) -> None:
    provider = ReplayProvider.from_path(script_of(tmp_path, "one"), pace_ms=1)
    bind(provider, "a")

    assert await collect(provider, "a") == said("one")


@pytest.mark.anyio
async def test_placeholders_are_filled_from_the_request_text(tmp_path: Path) -> None:
    provider = ReplayProvider.from_path(
        script_of(tmp_path, "Hello {{fromRequest:name is (\\w+)}}!")
    )
    bind(provider, "a")

    assert await collect(provider, "a", "my name is Ada") == said("Hello Ada!")


@pytest.mark.anyio
async def test_placeholder_without_a_match_fails_the_stream_after_the_earlier_chunks(
    tmp_path: Path,
) -> None:
    (tmp_path / "replay.override.json").write_text(
        json.dumps(
            [
                {
                    "kind": "chunks",
                    "chunks": [
                        {"type": "text-delta", "index": 0, "text": "ok"},
                        {"type": "text-delta", "index": 0, "text": "{{fromRequest:id-(\\d+)}}"},
                        {"type": "finish", "reason": "stop"},
                    ],
                }
            ]
        )
    )
    provider = ReplayProvider.from_path(script_of(tmp_path))
    bind(provider, "a")
    got: list[StreamChunk] = []

    with pytest.raises(ProviderError) as exc:
        async for c in provider.stream(request("a", "no ids")):
            got.append(c)

    assert got == [TextDelta(0, "ok")]
    assert (
        exc.value.message == "llm-replay: {{fromRequest:id-(\\d+)}} found no match in the request"
    )


def test_request_text_joins_user_tool_and_assistant_text_one_message_a_line() -> None:
    messages = [
        UserTurn([TextContent("hi")]),
        AssistantTurn([AssistantText("hello")]),
        UserTurn([TextContent("bye")]),
    ]

    assert request_text(messages) == "hi\nhello\nbye"


# ---------------------------------------------------------------------------------------------
# Throw and hang.


def with_override(tmp_path: Path, entries: list[dict[str, Any]]) -> ReplayProvider:
    script_of(tmp_path)
    (tmp_path / "replay.override.json").write_text(json.dumps(entries))
    return ReplayProvider.from_path(tmp_path)


PREFIX = [
    {"type": "text-delta", "index": 0, "text": "par"},
    {"type": "text-delta", "index": 0, "text": "tial"},
]


@pytest.mark.anyio
async def test_throw_streams_its_prefix_then_raises_with_message_and_code(tmp_path: Path) -> None:
    provider = with_override(
        tmp_path, [{"kind": "throw", "chunks": PREFIX, "message": "overloaded", "code": 529}]
    )
    bind(provider, "a")
    got: list[StreamChunk] = []

    with pytest.raises(ProviderError) as exc:
        async for c in provider.stream(request("a")):
            got.append(c)

    assert got == [TextDelta(0, "par"), TextDelta(0, "tial")]
    assert (exc.value.message, exc.value.code) == ("overloaded", 529)


@pytest.mark.anyio
async def test_throw_without_a_code_raises_with_code_none(tmp_path: Path) -> None:
    provider = with_override(tmp_path, [{"kind": "throw", "chunks": [], "message": "boom"}])
    bind(provider, "a")

    with pytest.raises(ProviderError) as exc:
        await collect(provider, "a")

    assert (exc.value.message, exc.value.code) == ("boom", None)


@pytest.mark.anyio
async def test_hang_writes_its_ready_file_relative_to_cwd_and_stops_when_cancelled(
    tmp_path: Path,
) -> None:
    cwd = tmp_path / "workspace"
    cwd.mkdir()
    provider = with_override(
        tmp_path, [{"kind": "hang", "chunks": PREFIX, "readyFile": "hung.txt"}]
    )
    bind(provider, "a", cwd=cwd)
    got: list[StreamChunk] = []

    async def consume() -> None:
        async for c in provider.stream(request("a")):
            got.append(c)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await wait_for((cwd / "hung.txt").exists, interval=0.001)
            tg.cancel_scope.cancel()

    assert (cwd / "hung.txt").read_text() == "ready\n"
    assert got == [TextDelta(0, "par"), TextDelta(0, "tial")]


@pytest.mark.anyio
async def test_hang_with_an_absolute_ready_file_ignores_cwd(tmp_path: Path) -> None:
    ready = tmp_path / "abs-ready"
    provider = with_override(tmp_path, [{"kind": "hang", "readyFile": str(ready)}])
    bind(provider, "a", cwd=tmp_path / "elsewhere")

    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(collect, provider, "a")
            await wait_for(ready.exists, interval=0.001)
            tg.cancel_scope.cancel()

    assert not scope.cancelled_caught
    assert ready.read_text() == "ready\n"


@pytest.mark.anyio
async def test_hang_without_a_ready_file_waits_until_cancelled(tmp_path: Path) -> None:
    provider = with_override(
        tmp_path,
        [{"kind": "hang"}, {"kind": "chunks", "chunks": [{"type": "finish", "reason": "stop"}]}],
    )
    bind(provider, "a")
    got: list[StreamChunk] = []

    with anyio.move_on_after(0.05) as scope:
        async for c in provider.stream(request("a")):
            got.append(c)

    assert scope.cancelled_caught
    assert got == []
    assert await collect(provider, "a") == [Finish("stop")]


# ---------------------------------------------------------------------------------------------
# Subagent children.


def with_children(tmp_path: Path) -> ReplayProvider:
    script_of(tmp_path, "parent")
    write_fixture(tmp_path / "session.1.jsonl", call(0, 0, "first child"))
    write_fixture(
        tmp_path / "session.2.jsonl", call(0, 0, "second child"), call(0, 1, "second child again")
    )
    return ReplayProvider.from_path(tmp_path)


@pytest.mark.anyio
async def test_children_get_child_fixtures_in_first_call_order_not_bind_order(
    tmp_path: Path,
) -> None:
    provider = with_children(tmp_path)
    bind(provider, "parent")
    bind(provider, "early-bound", parent="parent")
    bind(provider, "late-bound", parent="parent")

    assert await collect(provider, "late-bound") == said("first child")
    assert await collect(provider, "early-bound") == said("second child")
    assert await collect(provider, "early-bound") == said("second child again")


@pytest.mark.anyio
async def test_child_asking_when_every_child_fixture_is_taken_is_an_error(tmp_path: Path) -> None:
    provider = with_children(tmp_path)
    for child in ("c1", "c2", "c3"):
        bind(provider, child, parent="parent")
    await collect(provider, "c1")
    await collect(provider, "c2")

    with pytest.raises(ProviderError) as exc:
        await collect(provider, "c3")

    assert exc.value.message == (
        "llm-replay: subagent session c3 asked for a model call, but every child fixture (2) is already bound"
    )


# ---------------------------------------------------------------------------------------------
# Consumption.


@pytest.mark.anyio
async def test_assert_consumed_passes_when_every_script_was_used(tmp_path: Path) -> None:
    provider = with_children(tmp_path)
    bind(provider, "parent")
    bind(provider, "c1", parent="parent")
    bind(provider, "c2", parent="parent")
    for session in ("parent", "c1", "c2", "c2"):
        await collect(provider, session)

    assert provider.unconsumed() == []
    provider.assert_consumed()


@pytest.mark.anyio
async def test_assert_consumed_names_every_script_with_unused_calls(tmp_path: Path) -> None:
    provider = with_children(tmp_path)
    bind(provider, "parent")
    bind(provider, "c1", parent="parent")
    await collect(provider, "c1")

    with pytest.raises(ReplayError) as exc:
        provider.assert_consumed()

    assert str(exc.value) == (
        f"llm-replay: {tmp_path / 'session.jsonl'}: 1 of 1 model calls were never made; "
        f"{tmp_path / 'session.2.jsonl'}: 2 of 2 model calls were never made"
    )


@pytest.mark.anyio
async def test_consumption_counts_the_furthest_any_session_got(tmp_path: Path) -> None:
    provider = ReplayProvider.from_path(script_of(tmp_path, "one", "two"))
    bind(provider, "a")
    bind(provider, "b")
    await collect(provider, "a")
    await collect(provider, "a")
    await collect(provider, "b")

    provider.assert_consumed()


def test_calls_a_resumed_session_already_made_count_as_consumed(tmp_path: Path) -> None:
    provider = ReplayProvider.from_path(script_of(tmp_path, "one", "two"))
    bind(provider, "loaded", model_calls=2)

    provider.assert_consumed()
