"""A real HTTP server on 127.0.0.1 that speaks OpenAI's streaming chat completions (a test helper).

`FakeOpenAI` is a `sse_server.LoopbackServer` (a script of canned responses, `Sse` streams and
`Status` answers, one per request) whose streams end with `data: [DONE]` (unless `done=False`
or `cut=True`). The builders below (`chunk`, `text`, `reasoning`, `call`, `usage`) give
`chat.completion.chunk` payloads.
"""

from __future__ import annotations

from typing import Any

from sse_server import LoopbackServer, Request, Response, Sse, Status


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk`, as OpenAI sends it."""
    value: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test",
        "choices": [],
    }
    if delta is not None or finish is not None:
        value["choices"] = [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}
        ]
    if usage is not None:
        value["usage"] = usage
    return value


def text(t: str) -> dict[str, Any]:
    return chunk({"content": t})


def reasoning(t: str, key: str = "reasoning_content") -> dict[str, Any]:
    return chunk({key: t})


def call(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    """A `tool_calls` delta: id and name only on the first delta of a call, like OpenAI."""
    entry: dict[str, Any] = {"index": index}
    if id is not None:
        entry["id"] = id
        entry["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        entry["function"] = function
    return chunk({"tool_calls": [entry]})


def usage(prompt: int, completion: int, cached: int | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        value["prompt_tokens_details"] = {"cached_tokens": cached}
    return chunk(usage=value)


class FakeOpenAI(LoopbackServer):
    root = "/v1"
    end_marker = "[DONE]"


__all__ = [
    "FakeOpenAI",
    "Request",
    "Response",
    "Sse",
    "Status",
    "call",
    "chunk",
    "reasoning",
    "text",
    "usage",
]
