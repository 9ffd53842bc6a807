"""Assembling a step's stream (SPEC 1.2): chunks in, the `assistant/message` blocks out.

Blocks are keyed by stream index, in first-appearance order; a cancelled stream keeps its
non-empty text and reasoning only.
"""

from __future__ import annotations

from collections.abc import Iterable

from acp_server.core.assembly import MessageAssembler
from acp_server.core.stream import (
    AssistantReasoning,
    AssistantText,
    AssistantToolCall,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    ReasoningSignature,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)


def assembled(chunks: Iterable[StreamChunk]) -> MessageAssembler:
    assembler = MessageAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


def test_nothing_fed_assembles_to_nothing() -> None:
    assembler = MessageAssembler()

    assert (assembler.content(), assembler.usage, assembler.finish, assembler.chunks) == (
        [],
        None,
        None,
        0,
    )


def test_deltas_join_into_one_block_per_index_in_first_appearance_order() -> None:
    assembler = assembled(
        [
            ReasoningDelta(1, "Think"),
            TextDelta(0, "Hel"),
            ReasoningDelta(1, "ing."),
            TextDelta(0, "lo"),
            TextDelta(2, "Bye"),
        ]
    )

    assert assembler.content() == [
        AssistantReasoning("Thinking."),
        AssistantText("Hello"),
        AssistantText("Bye"),
    ]


def test_block_start_places_the_block_before_its_first_delta() -> None:
    assembler = assembled(
        [BlockStart(5, "text"), ReasoningDelta(2, "hm"), TextDelta(5, "answer"), BlockEnd(5)]
    )

    assert assembler.content() == [AssistantText("answer"), AssistantReasoning("hm")]


def test_a_signature_chunk_signs_its_reasoning_block_and_no_other() -> None:
    chunks: list[StreamChunk] = [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "Think "),
        ReasoningDelta(0, "twice."),
        ReasoningSignature(0, "sig-A=="),
        BlockEnd(0),
        BlockStart(1, "reasoning"),
        ReasoningDelta(1, "Unsigned."),
        BlockEnd(1),
    ]

    assert assembled(chunks).content() == [
        AssistantReasoning("Think twice.", "sig-A=="),
        AssistantReasoning("Unsigned."),
    ]


def test_an_interrupted_stream_keeps_the_signature_of_a_block_it_completed() -> None:
    chunks: list[StreamChunk] = [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "Done."),
        ReasoningSignature(0, "sig-B=="),
        BlockEnd(0),
        BlockStart(1, "text"),
        TextDelta(1, "Hal"),
    ]

    assert assembled(chunks).content(interrupted=True) == [
        AssistantReasoning("Done.", "sig-B=="),
        AssistantText("Hal"),
    ]


def test_tool_call_takes_id_and_name_from_its_first_deltas_and_joins_arguments() -> None:
    assembler = assembled(
        [
            BlockStart(0, "tool-call"),
            ToolCallDelta(0, "call-1", ""),
            ToolCallDelta(0, "call-1", '{"path":', "read_file"),
            ToolCallDelta(0, "call-1", ' "a.txt"}', "ignored_later_name"),
            BlockEnd(0),
        ]
    )

    assert assembler.content() == [AssistantToolCall("call-1", "read_file", '{"path": "a.txt"}')]


def test_tool_calls_lists_only_the_tool_call_blocks() -> None:
    assembler = assembled(
        [
            TextDelta(0, "Two reads."),
            ToolCallDelta(1, "c1", "{}", "read_file"),
            ToolCallDelta(2, "c2", "{}", "todo_write"),
        ]
    )

    assert assembler.tool_calls() == [
        AssistantToolCall("c1", "read_file", "{}"),
        AssistantToolCall("c2", "todo_write", "{}"),
    ]


def test_interrupted_content_drops_tool_calls_and_empty_blocks() -> None:
    assembler = assembled(
        [
            BlockStart(0, "reasoning"),
            BlockStart(1, "text"),
            TextDelta(1, "So far"),
            ToolCallDelta(2, "c1", '{"pa', "read_file"),
            TextDelta(3, ""),
            ReasoningDelta(4, "late thought"),
        ]
    )

    assert assembler.content(interrupted=True) == [
        AssistantText("So far"),
        AssistantReasoning("late thought"),
    ]


def test_completed_content_keeps_tool_calls() -> None:
    assembler = assembled(
        [TextDelta(0, "Reading."), ToolCallDelta(1, "c1", "{}", "read_file"), Finish("tool-calls")]
    )

    assert assembler.content() == [
        AssistantText("Reading."),
        AssistantToolCall("c1", "read_file", "{}"),
    ]


def test_usage_and_finish_are_recorded_and_every_chunk_counted() -> None:
    assembler = assembled([TextDelta(0, "hi"), UsageChunk(Usage(10, 2, 4)), Finish("length")])

    assert assembler.usage == Usage(10, 2, 4)
    assert assembler.finish == "length"
    assert assembler.chunks == 3
    assert assembler.content() == [AssistantText("hi")]


def test_the_last_usage_chunk_wins() -> None:
    assembler = assembled([UsageChunk(Usage(1, 1)), UsageChunk(Usage(10, 5))])

    assert assembler.usage == Usage(10, 5)
