"""The `openai` provider against a real HTTP server on loopback (tests/openai_server.py).

Every delta the server sends becomes exactly one chunk, in order; blocks, usage and the finish
are placed as `acp_server.providers.openai_stream` documents; errors in OpenAI's wire (error
events, error bodies, a JSON answer) fail as they should. What every provider does (retries, a
cut stream, cancellation, the key) is tests/test_provider_contract.py.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from openai_server import FakeOpenAI, Sse, Status, call, chunk, reasoning, text, usage
from provider_values import cd, end, fin, rd, run, start, td, use

from acp_server.agent.tools import BUILTIN_TOOLS
from acp_server.core.content import DiffContent, ImageContent, TextContent
from acp_server.core.messages import AssistantTurn, ToolTurn, UserTurn
from acp_server.core.stream import AssistantReasoning, AssistantText, AssistantToolCall
from acp_server.providers.base import ModelRequest, ProviderError
from acp_server.providers.openai import OpenAIProvider, ProviderConfigError
from acp_server.providers.openai_stream import DeltaMapper, request_body
from acp_server.providers.wire import SseDecoder

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdefSECRET"


def provider(server: FakeOpenAI, **options: Any) -> OpenAIProvider:
    options.setdefault("retry_base_delay", 0.01)
    options.setdefault("trust_env", False)
    return OpenAIProvider("test-model", server.base_url, KEY, **options)  # type: ignore[arg-type]  # a plain str key, which __post_init__ accepts


# ---------------------------------------------------------------------------------------------
# Streams that complete.


@pytest.mark.process
async def test_text_deltas_become_one_chunk_each_and_the_request_is_openai_streaming() -> None:
    stream = Sse(
        [
            chunk({"role": "assistant", "content": ""}),
            text("Hel"),
            text("lo"),
            text(" there!"),
            chunk(finish="stop"),
            usage(12, 3, cached=4),
        ]
    )
    with FakeOpenAI([stream]) as server:
        request = ModelRequest(
            session_id="s1",
            messages=[UserTurn([TextContent("hello")])],
            tools=BUILTIN_TOOLS.definitions[:1],
        )
        chunks, error = await run(provider(server), request)
    assert error is None
    assert chunks == [
        start(0, "text"),
        td(0, "Hel"),
        td(0, "lo"),
        td(0, " there!"),
        end(0),
        use(12, 3, 4),
        fin("stop"),
    ]
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    assert sent.headers["Accept"] == "text/event-stream"
    tool = BUILTIN_TOOLS.definitions[0]
    assert sent.body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
        ],
    }


@pytest.mark.process
@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_reasoning_content_then_text_are_two_blocks(key: str) -> None:
    stream = Sse(
        [
            reasoning("The user ", key),
            reasoning("greets.", key),
            text("Hi"),
            text("!"),
            chunk(finish="stop"),
            usage(5, 7),
        ]
    )
    with FakeOpenAI([stream]) as server:
        chunks, error = await run(provider(server))
    assert error is None
    assert chunks == [
        start(0, "reasoning"), rd(0, "The user "), rd(0, "greets."), end(0),
        start(1, "text"), td(1, "Hi"), td(1, "!"), end(1),
        use(5, 7), fin("stop"),
    ]  # fmt: skip


@pytest.mark.process
async def test_two_parallel_tool_calls_split_across_many_deltas() -> None:
    stream = Sse([
        text("Reading both."),
        call(0, id="call_A", name="read_file", arguments=""),
        call(0, arguments='{"pa'), call(0, arguments='th": '), call(0, arguments='"a.txt"'), call(0, arguments="}"),
        call(1, id="call_B", name="read_file"),
        call(1, arguments="{"), call(1, arguments='"path"'), call(1, arguments=': "b.txt"}'),
        chunk(finish="tool_calls"),
        usage(40, 22),
    ])  # fmt: skip
    with FakeOpenAI([stream]) as server:
        chunks, error = await run(provider(server))
    assert error is None
    assert chunks == [
        start(0, "text"), td(0, "Reading both."), end(0),
        start(1, "tool-call"),
        cd(1, "call_A", "", "read_file"), cd(1, "call_A", '{"pa'), cd(1, "call_A", 'th": '),
        cd(1, "call_A", '"a.txt"'), cd(1, "call_A", "}"),
        end(1),
        start(2, "tool-call"),
        cd(2, "call_B", "", "read_file"), cd(2, "call_B", "{"), cd(2, "call_B", '"path"'), cd(2, "call_B", ': "b.txt"}'),
        end(2),
        use(40, 22), fin("tool-calls"),
    ]  # fmt: skip


@pytest.mark.process
async def test_usage_and_finish_in_one_chunk_and_a_body_that_ends_after_the_finish_without_done() -> (
    None
):
    final = chunk(finish="length")
    final["usage"] = {"prompt_tokens": 3, "completion_tokens": 9}
    with FakeOpenAI([Sse([text("abc"), final], done=False, close_delimited=True)]) as server:
        chunks, error = await run(provider(server))
    assert error is None
    assert chunks == [start(0, "text"), td(0, "abc"), end(0), use(3, 9), fin("length")]


@pytest.mark.process
async def test_a_connection_that_breaks_after_the_finish_reason_is_a_complete_stream() -> None:
    with FakeOpenAI([Sse([text("x"), chunk(finish="stop")], cut=True)]) as server:
        chunks, error = await run(provider(server))
    assert error is None
    assert chunks == [start(0, "text"), td(0, "x"), end(0), fin("stop")]


# ---------------------------------------------------------------------------------------------
# Failures after chunks: never retried, the chunks already yielded stand.


@pytest.mark.process
async def test_an_error_event_after_some_chunks_fails_with_its_code() -> None:
    stream = Sse(
        [
            text("Par"),
            text("tial"),
            {"error": {"message": "upstream overloaded", "type": "server_error", "code": 500}},
        ]
    )
    with FakeOpenAI([stream]) as server:
        chunks, error = await run(provider(server))
    assert chunks == [start(0, "text"), td(0, "Par"), td(0, "tial")]
    assert error is not None and error.code == 500
    assert (
        error.message
        == "openai: the server reported an error mid-stream: upstream overloaded (after 3 chunks)"
    )
    assert len(server.requests) == 1


@pytest.mark.process
async def test_a_body_that_ends_early_without_finish_is_a_cut_stream() -> None:
    with FakeOpenAI([Sse([text("a"), text("b")], done=False, close_delimited=True)]) as server:
        chunks, error = await run(provider(server))
    assert chunks == [start(0, "text"), td(0, "a"), td(0, "b")]
    assert error is not None and error.code == "stream-cut"
    assert (
        error.message
        == "openai: the stream ended before its finish reason (after 2 events) (after 3 chunks)"
    )


@pytest.mark.process
async def test_a_malformed_event_fails_naming_it() -> None:
    with FakeOpenAI([Sse([text("fine"), '{"choices": [{"delta": {"content": 7}}]}'])]) as server:
        chunks, error = await run(provider(server))
    assert chunks == [start(0, "text"), td(0, "fine")]
    assert error is not None and error.code == "malformed-event"
    assert error.message == (
        "openai: malformed server-sent event 2 (Expected `str | null`, got `int` - at `$.choices[0].delta.content`): "
        """'{"choices": [{"delta": {"content": 7}}]}' (after 2 chunks)"""
    )


@pytest.mark.process
async def test_a_malformed_first_event_is_not_retried() -> None:
    with FakeOpenAI([Sse(["not json"])]) as server:
        chunks, error = await run(provider(server))
    assert chunks == [] and error is not None and error.code == "malformed-event"
    assert "'not json'" in error.message
    assert len(server.requests) == 1


@pytest.mark.process
async def test_a_json_answer_to_a_streaming_request_is_refused_clearly() -> None:
    completion = {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    }
    with FakeOpenAI(
        [
            Status(200, completion),
            Status(200, {"error": {"message": "model not loaded", "code": 503}}),
        ]
    ) as server:
        first = await run(provider(server))
        second = await run(provider(server))
    assert first[0] == [] and first[1] is not None and first[1].code == "not-a-stream"
    assert first[1].message.startswith(
        "openai: the server answered with JSON, not an event stream (does it support stream: true?): "
    )
    assert second[1] is not None and (second[1].code, second[1].message) == (
        503,
        "openai: the server answered with an error: model not loaded",
    )


# ---------------------------------------------------------------------------------------------
# The pure parts.


def test_sse_decoder_fed_whole_or_line_by_line_with_comments_and_multiline_data() -> None:
    decoder = SseDecoder()
    lines = [
        ": keep-alive",
        "event: message",
        'data: {"a":',
        "data:1}",
        "id: 7",
        "",
        "",
        "data: [DONE]",
    ]
    out = [d for line in lines if (d := decoder.line(line)) is not None]
    assert out == ['{"a":\n1}']
    assert decoder.end() == "[DONE]"
    assert decoder.end() is None


def test_sse_decoder_refuses_an_endless_event() -> None:
    decoder = SseDecoder(max_chars=10)
    decoder.line("data: 12345")
    with pytest.raises(ProviderError, match="longer than 10 characters"):
        decoder.line("data: 67890")


def test_mapper_fills_in_a_missing_call_id_and_keeps_late_fragments_on_their_block() -> None:
    mapper = DeltaMapper(lambda index: f"made-{index}")
    payload = msgspec.json.encode
    out = []
    out += mapper.event(
        payload(
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "function": {"name": "a", "arguments": "{"}},
                        {"index": 1, "function": {"name": "b", "arguments": "{"}},
                    ]
                }
            )
        ).decode()
    )
    out += mapper.event(
        payload(
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}, finish="stop")
        ).decode()
    )
    out += mapper.event("[DONE]")
    assert [msgspec.to_builtins(c) for c in out] == [
        start(0, "tool-call"), cd(0, "made-0", "{", "a"), end(0),
        start(1, "tool-call"), cd(1, "made-1", "{", "b"),
        cd(0, "made-0", "}"), end(1),
        fin("tool-calls"),  # "stop" with tool calls: the loop must run them
    ]  # fmt: skip
    assert mapper.done


def test_request_body_maps_the_history() -> None:
    history = [
        UserTurn([TextContent("look at"), TextContent("this")]),
        AssistantTurn(
            [
                AssistantReasoning("hmm"),
                AssistantText("Sure."),
                AssistantToolCall("c1", "read_file", '{"path":"a"}'),
            ]
        ),
        ToolTurn("c1", [TextContent("line 1"), DiffContent("a", "new")]),
        AssistantTurn([AssistantReasoning("only thinking")]),
        AssistantTurn([AssistantToolCall("c2", "todo_write", "{}")]),
        UserTurn([TextContent("and"), ImageContent("QUJD", "image/png")]),
    ]
    body = request_body("m", history, [])
    assert "tools" not in body
    assert body["messages"] == [
        {"role": "user", "content": "look at\n\nthis"},
        {
            "role": "assistant",
            "content": "Sure.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "line 1\n(diff of a)"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "todo_write", "arguments": "{}"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ],
        },
    ]


@pytest.mark.process
async def test_the_system_prompt_goes_first_and_max_tokens_with_the_request() -> None:
    with FakeOpenAI([Sse([text("ok"), chunk(finish="stop")])]) as server:
        request = ModelRequest(
            session_id="s1",
            messages=[UserTurn([TextContent("hello")])],
            tools=[],
            system="Be brief.",
            max_tokens=256,
        )
        _, error = await run(provider(server), request)
    assert error is None
    body = server.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello"},
    ]
    assert body["max_tokens"] == 256


def test_the_key_comes_from_the_environment_and_leaves_it() -> None:
    environ = {"MY_KEY": KEY, "OTHER": "x"}
    p = OpenAIProvider.from_env("m", "http://127.0.0.1:1/v1", "MY_KEY", environ=environ)
    assert environ == {"OTHER": "x"}  # programs the model runs do not inherit it
    assert p.api_key is not None and p.api_key.reveal() == KEY
    assert KEY not in repr(p) and KEY not in str(p.api_key)


def test_bad_base_urls_are_refused() -> None:
    for url in ("ftp://example.com", "not a url", "http://", "https://example.com/v1?key=x"):
        with pytest.raises(ProviderConfigError):
            OpenAIProvider("m", url)


@pytest.mark.parametrize(
    "bad", [KEY + "\r", KEY + "\n", " " + KEY, KEY[:8] + "\x00" + KEY[8:], KEY + "é"]
)
def test_a_key_no_header_can_carry_is_refused_without_showing_it(bad: str) -> None:
    with pytest.raises(ProviderConfigError) as refused:
        OpenAIProvider("m", "http://127.0.0.1:1/v1", bad)
    assert str(refused.value) == (
        "the API key holds a character an HTTP header cannot carry (a control character, "
        "a line break, surrounding whitespace or a non-ASCII character)"
    )
