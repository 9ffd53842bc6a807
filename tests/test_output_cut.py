"""The cut of a replayed tool output (SPEC 4.2): over 64 KiB, a replay shows the first 64 KiB and
`_meta["acp-server"].cut` says which `tool/result` holds the whole.

The cut itself is pure (`cut_output`); the projection's use of it is checked on the wire shape,
held to the official ACP models.
"""

from __future__ import annotations

from typing import Any

import acp.schema
import msgspec
from acp_models import exact
from msgspec import UNSET

from acp_server.agent.tools import BUILTIN_TOOLS
from acp_server.core.acp_updates import SessionNotification, SessionUpdate
from acp_server.core.content import DiffContent, ImageContent, TextContent, ToolResultContent
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    SessionEvent,
    StepData,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnStart,
    TurnStartData,
)
from acp_server.core.output_cut import REPLAY_OUTPUT_LIMIT, OutputCut, cut_output, output_size
from acp_server.core.projection import project_load
from acp_server.core.stream import AssistantToolCall, Usage

KIB = 1024


def result(*content: ToolResultContent, raw: Any = UNSET) -> ToolResultData:
    return ToolResultData(0, 0, "call_1", list(content), UNSET, raw)


def test_the_limit_is_64_kib() -> None:
    assert REPLAY_OUTPUT_LIMIT == 64 * KIB


def test_an_output_of_exactly_64_kib_is_not_cut() -> None:
    whole = result(TextContent("x" * (64 * KIB)))

    assert cut_output(whole, 9) == (whole, None)


def test_a_text_output_one_byte_over_is_cut_to_64_kib_with_its_seq_and_size() -> None:
    shown, cut = cut_output(result(TextContent("x" * (64 * KIB + 1))), 9)

    assert shown == result(TextContent("x" * (64 * KIB)))
    assert cut == OutputCut(9, 64 * KIB + 1)


def test_a_cut_never_splits_a_character() -> None:
    # "é" is two bytes: 65,535 ASCII bytes leave one byte, half of it.
    text = "x" * (64 * KIB - 1) + "é" + "y" * 10

    shown, cut = cut_output(result(TextContent(text)), 3)

    assert shown.content == [TextContent("x" * (64 * KIB - 1))]
    assert cut == OutputCut(3, 64 * KIB + 11)


def test_a_four_byte_character_that_fits_is_kept_whole() -> None:
    text = "x" * (64 * KIB - 4) + "😀" + "y"

    shown, _ = cut_output(result(TextContent(text)), 3)

    assert shown.content == [TextContent("x" * (64 * KIB - 4) + "😀")]
    assert len(shown.content[0].text.encode()) == 64 * KIB  # type: ignore[union-attr]


def test_sizes_count_text_in_utf8_bytes_and_other_blocks_as_json() -> None:
    image = ImageContent("aGk=", "image/png")

    assert output_size(result(TextContent("héllo"), image)) == 6 + len(
        b'{"type":"image","data":"aGk=","mimeType":"image/png"}'
    )


def test_blocks_after_a_cut_text_are_left_out() -> None:
    shown, cut = cut_output(
        result(TextContent("a" * (60 * KIB)), TextContent("b" * (8 * KIB)), TextContent("c")), 5
    )

    assert shown.content == [TextContent("a" * (60 * KIB)), TextContent("b" * (4 * KIB))]
    assert cut == OutputCut(5, 68 * KIB + 1)


def test_a_block_other_than_text_is_kept_whole_or_not_at_all() -> None:
    diff = DiffContent("/w/big.txt", "n" * (40 * KIB), "o" * (40 * KIB))

    shown, cut = cut_output(result(TextContent("Wrote big.txt."), diff, TextContent("done")), 7)

    assert shown.content == [TextContent("Wrote big.txt.")]
    assert cut == OutputCut(7, 14 + len(msgspec.json.encode(diff)) + 4)


def test_the_raw_output_is_kept_when_it_fits_in_what_the_content_left() -> None:
    raw = {"exitCode": 0}

    shown, cut = cut_output(result(TextContent("x" * (64 * KIB - 100)), raw=raw), 1)
    assert (shown.raw_output, cut) == (raw, None)

    big = {"rows": ["r" * (64 * KIB)]}
    shown, cut = cut_output(result(TextContent("short"), raw=big), 1)
    assert shown == result(TextContent("short"))
    assert cut == OutputCut(1, 5 + len(msgspec.json.encode(big)))


def test_a_cut_of_a_text_that_leaves_no_room_keeps_no_empty_block() -> None:
    image = ImageContent("A" * (64 * KIB), "image/png")
    size = len(msgspec.json.encode(image))

    shown, cut = cut_output(result(image, TextContent("after")), 2, limit=size)

    assert shown.content == [image]
    assert cut == OutputCut(2, size + 5)


# ---------------------------------------------------------------------------------------------
# The replay: the cut on the `tool_call_update`, held to the ACP models.


def replayed_read(output: str) -> list[SessionEvent]:
    call = AssistantToolCall("call_1", "read_file", '{"path": "big.txt"}')
    return [
        TurnStart(0, 0, TurnStartData(0)),
        StepStart(1, 0, StepData(0, 0)),
        AssistantMessageEvent(
            2, 0, AssistantMessageData(0, 0, AssistantMessage("a0-0", [call]), Usage(1, 1))
        ),
        ToolCall(3, 0, ToolCallData(0, 0, "call_1", "read_file", '{"path": "big.txt"}')),
        ToolResult(
            4, 0, result(TextContent(output), raw={"path": "/w/big.txt", "truncated": False})
        ),
        StepEnd(5, 0, StepData(0, 0)),
    ]


def closing_update(updates: list[SessionUpdate]) -> dict[str, Any]:
    params = msgspec.json.decode(msgspec.json.encode(SessionNotification("s", updates[-1])))
    exact(acp.schema.SessionNotification, params, "a replayed tool_call_update")
    update: dict[str, Any] = params["update"]
    return update


def test_a_replayed_output_over_64_kib_carries_the_cut_in_its_meta() -> None:
    output = "line\n" * (40 * KIB)  # 200 KiB

    update = closing_update(project_load(replayed_read(output), BUILTIN_TOOLS.present))

    assert update["sessionUpdate"] == "tool_call_update"
    assert update["content"] == [
        {"type": "content", "content": {"type": "text", "text": output[: 64 * KIB]}}
    ]
    assert "rawOutput" not in update
    raw = b'{"path":"/w/big.txt","truncated":false}'
    assert update["_meta"] == {"acp-server": {"cut": {"seq": 4, "bytes": 200 * KIB + len(raw)}}}


def test_a_replayed_output_within_64_kib_is_shown_whole_without_meta() -> None:
    output = "line\n" * 1000

    update = closing_update(project_load(replayed_read(output), BUILTIN_TOOLS.present))

    assert update["content"] == [{"type": "content", "content": {"type": "text", "text": output}}]
    assert update["rawOutput"] == {"path": "/w/big.txt", "truncated": False}
    assert "_meta" not in update
