"""The `anthropic` provider against a real HTTP server on loopback (tests/anthropic_server.py).

Every delta the API streams becomes exactly one chunk, in order; thinking keeps its signature
and goes back signed across a tool-use turn; usage counts cache reads and writes; errors in
Anthropic's wire (error events, `x-should-retry`, a body that ends early) fail as they should.
What every provider does (retries, a cut stream, cancellation, the key) is
tests/test_provider_contract.py. No test waits: the retry delays are recorded, not slept.
"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic_server import (
    FakeAnthropic,
    Sse,
    Status,
    error_body,
    error_event,
    message_delta,
    message_start,
    message_stop,
    ping,
    reply,
    text_block,
    thinking_block,
    tool_block,
)
from provider_values import Sleeps, cd, end, fin, rd, run, start, td, use

from acp_server.core.assembly import MessageAssembler
from acp_server.core.content import ImageContent, TextContent
from acp_server.core.messages import AssistantTurn, ToolDefinition, ToolTurn, UserTurn
from acp_server.providers.anthropic import AnthropicProvider
from acp_server.providers.base import ModelRequest
from acp_server.providers.http import ProviderConfigError

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-7Hq2Zp9Lw4Xc8Vb3Nm6RSECRET"
READ_FILE = ToolDefinition(
    "read_file",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def provider(
    server: FakeAnthropic, sleeps: Sleeps | None = None, **options: Any
) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-test",
        server.base_url,
        KEY,  # type: ignore[arg-type]  # a plain str key, which __post_init__ accepts
        trust_env=False,
        sleep=sleeps if sleeps is not None else Sleeps(),
        **options,
    )


def sig(i: int, s: str) -> dict[str, Any]:
    return {"type": "reasoning-signature", "index": i, "signature": s}


# ---------------------------------------------------------------------------------------------
# Streams that complete.


@pytest.mark.process
async def test_text_deltas_become_one_chunk_each_and_the_request_is_a_streaming_messages_call() -> (
    None
):
    stream = Sse(
        [
            message_start(12),
            ping(),
            *text_block(0, "Hel", "lo", " there!"),
            message_delta("end_turn", 3),
            message_stop(),
        ]
    )
    with FakeAnthropic([stream]) as server:
        request = ModelRequest(
            session_id="s1",
            messages=[UserTurn([TextContent("hello")])],
            tools=[READ_FILE],
            system="You are terse.",
        )
        chunks, error = await run(provider(server), request)
    assert error is None
    assert chunks == [
        start(0, "text"),
        td(0, "Hel"),
        td(0, "lo"),
        td(0, " there!"),
        end(0),
        use(12, 3),
        fin("stop"),
    ]
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["Accept"] == "text/event-stream"
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 32000,
        "stream": True,
        "system": [
            {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}
                ],
            }
        ],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file.",
                "input_schema": READ_FILE.parameters,
            }
        ],
    }


@pytest.mark.process
async def test_thinking_deltas_keep_their_signature_and_usage_counts_cache_reads_and_writes() -> (
    None
):
    stream = Sse([
        message_start(7, cache_read=100, cache_write=20),
        *thinking_block(0, "Let me ", "think.", signature="EqoBsig=="),
        *text_block(1, "Four."),
        message_delta("end_turn", 9),
        message_stop(),
    ])  # fmt: skip
    with FakeAnthropic([stream]) as server:
        chunks, error = await run(provider(server, thinking_budget=2048))
    assert error is None
    assert chunks == [
        start(0, "reasoning"),
        rd(0, "Let me "),
        rd(0, "think."),
        sig(0, "EqoBsig=="),
        end(0),
        start(1, "text"),
        td(1, "Four."),
        end(1),
        use(127, 9, cachedInputTokens=100, cacheWriteInputTokens=20),
        fin("stop"),
    ]
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


@pytest.mark.process
async def test_tool_use_streams_its_name_first_then_each_json_fragment() -> None:
    stream = Sse(reply(
        text_block(0, "Reading."),
        tool_block(1, "toolu_1", "read_file", '{"pa', 'th": "a.txt"}'),
        tool_block(2, "toolu_2", "list_files"),
        stop="tool_use",
    ))  # fmt: skip
    with FakeAnthropic([stream]) as server:
        chunks, error = await run(provider(server))
    assert error is None
    assert chunks == [
        start(0, "text"),
        td(0, "Reading."),
        end(0),
        start(1, "tool-call"),
        cd(1, "toolu_1", "", "read_file"),
        cd(1, "toolu_1", '{"pa'),
        cd(1, "toolu_1", 'th": "a.txt"}'),
        end(1),
        start(2, "tool-call"),
        cd(2, "toolu_2", "", "list_files"),
        cd(2, "toolu_2", "{}"),  # the API streams no fragment for an empty input
        end(2),
        use(10, 5),
        fin("tool-calls"),
    ]


@pytest.mark.process
@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool-calls"),
        ("max_tokens", "length"),
        ("refusal", "content-filter"),
    ],
)
@pytest.mark.process
async def test_each_stop_reason_becomes_its_finish(stop: str, finish: str) -> None:
    with FakeAnthropic([Sse(reply(text_block(0, "x"), stop=stop))]) as server:
        chunks, error = await run(provider(server))
    assert error is None
    assert chunks[-1] == fin(finish)


@pytest.mark.process
async def test_signed_thinking_goes_back_with_the_tool_call_across_a_tool_use_turn() -> None:
    first = Sse(reply(
        thinking_block(0, "I should read ", "a.txt.", signature="sig-turn-1"),
        tool_block(1, "toolu_1", "read_file", '{"path": ', '"a.txt"}'),
        stop="tool_use",
    ))  # fmt: skip
    second = Sse(reply(text_block(0, "It says hi.")))
    question = UserTurn([TextContent("What is in a.txt?")])
    with FakeAnthropic([first, second]) as server:
        p = provider(server, thinking_budget=1024, max_tokens=4096)
        assembler = MessageAssembler()
        async for chunk in p.stream(
            ModelRequest(session_id="s", messages=[question], tools=[READ_FILE])
        ):
            assembler.feed(chunk)
        history = [
            question,
            AssistantTurn(assembler.content()),
            ToolTurn("toolu_1", [TextContent("hi")]),
        ]
        chunks, error = await run(
            p, ModelRequest(session_id="s", messages=history, tools=[READ_FILE])
        )
    assert error is None
    assert chunks[-1] == fin("stop")
    assert server.requests[1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is in a.txt?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should read a.txt.", "signature": "sig-turn-1"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "a.txt"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "hi"}],
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]
    assert server.requests[1].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.process
async def test_unsigned_reasoning_is_not_sent_and_tool_results_join_the_next_prompt() -> None:
    history = [
        UserTurn([TextContent("Go.")]),
        AssistantTurn([]),
        ToolTurn("call_a", [TextContent("boom")], True),
        UserTurn([TextContent("And now?"), ImageContent(data="iVBORw0K", mime_type="image/png")]),
    ]
    from acp_server.core.stream import AssistantReasoning, AssistantToolCall

    history[1] = AssistantTurn(
        [
            AssistantReasoning("from another provider"),
            AssistantToolCall("call_a", "run", "not json"),
        ]
    )
    with FakeAnthropic([Sse(reply(text_block(0, "ok")))]) as server:
        _, error = await run(
            provider(server), ModelRequest(session_id="s", messages=history, tools=[])
        )
    assert error is None
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Go."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_a", "name": "run", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_a",
                    "content": [{"type": "text", "text": "boom"}],
                    "is_error": True,
                },
                {"type": "text", "text": "And now?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        },
    ]


# ---------------------------------------------------------------------------------------------
# Failures and retries.


@pytest.mark.process
async def test_x_should_retry_false_overrules_a_retryable_status() -> None:
    failing = Status(500, error_body("api_error", "no"), {"x-should-retry": "false"})
    with FakeAnthropic([failing]) as server:
        _, error = await run(provider(server))
    assert error is not None and error.code == 500
    assert len(server.requests) == 1


@pytest.mark.process
async def test_an_overloaded_error_event_before_any_chunk_is_retried() -> None:
    sleeps = Sleeps()
    script = [
        Sse([message_start(), ping(), error_event("overloaded_error", "Overloaded")]),
        Sse(reply(text_block(0, "ok"))),
    ]
    with FakeAnthropic(script) as server:
        chunks, error = await run(provider(server, sleeps))
    assert error is None and chunks[1] == td(0, "ok")
    assert len(sleeps.delays) == 1


@pytest.mark.process
async def test_an_error_event_after_chunks_fails_the_stream_keeping_what_came() -> None:
    script = [
        Sse(
            [
                message_start(),
                *text_block(0, "Hal")[:2],
                error_event("overloaded_error", "Overloaded"),
            ]
        )
    ]
    with FakeAnthropic(script) as server:
        chunks, error = await run(provider(server))
    assert chunks == [start(0, "text"), td(0, "Hal")]
    assert error is not None
    assert (error.message, error.code) == (
        "anthropic: the server reported an error mid-stream: Overloaded (after 2 chunks)",
        529,
    )
    assert len(server.requests) == 1


@pytest.mark.process
async def test_a_body_that_ends_before_message_stop_without_a_stop_reason_fails() -> None:
    ended = Sse([message_start(), *text_block(0, "x")])
    with FakeAnthropic([ended]) as server:
        chunks, error = await run(provider(server))
    assert chunks == [start(0, "text"), td(0, "x"), end(0)]
    assert error is not None
    assert (error.message, error.code) == (
        "anthropic: the stream ended before its stop reason (after 4 events) (after 3 chunks)",
        "stream-cut",
    )


@pytest.mark.process
async def test_a_body_that_ends_after_its_stop_reason_is_complete() -> None:
    ended = Sse([message_start(3), *text_block(0, "x"), message_delta("end_turn", 2)])
    with FakeAnthropic([ended]) as server:
        chunks, error = await run(provider(server))
    assert error is None
    assert chunks == [start(0, "text"), td(0, "x"), end(0), use(3, 2), fin("stop")]


# ---------------------------------------------------------------------------------------------
# Settings.


def test_a_thinking_budget_below_the_apis_minimum_or_above_max_tokens_is_refused() -> None:
    with pytest.raises(ProviderConfigError, match="at least 1024 tokens, got 1000"):
        AnthropicProvider("m", thinking_budget=1000)
    with pytest.raises(
        ProviderConfigError, match=r"\(8192\) must be less than max_tokens \(4096\)"
    ):
        AnthropicProvider("m", thinking_budget=8192, max_tokens=4096)
