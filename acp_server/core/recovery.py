"""Closing a turn whose process died (SPEC 2.5), as a pure function over the log's events."""

from __future__ import annotations

from collections.abc import Sequence

from .events import (
    SessionEvent,
    StepData,
    StepEnd,
    StepStart,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonInterrupted,
    TurnStart,
)

INTERRUPTED_RESULT_TEXT = "interrupted"


def interrupted_turn_closers(
    events: Sequence[SessionEvent], next_seq: int, time: int
) -> list[SessionEvent]:
    """The events that close the log's last turn if it has no `turn/end`, else nothing.

    `events` may leave out chunk events (only turn, step and tool events matter here);
    `next_seq` is the seq the first closer takes. In order: an error `tool/result` for each
    `tool/call` without a result, the missing `step/end`, then `turn/end {kind:
    "interrupted"}`. Partial chunks are left as they are.
    """
    start = None
    for i in range(len(events) - 1, -1, -1):
        kind = type(events[i])
        if kind is TurnEnd:
            return []
        if kind is TurnStart:
            start = i
            break
    if start is None:
        return []
    turn = events[start].data.turn  # type: ignore[union-attr]
    open_calls: dict[str, ToolCall] = {}
    open_step: int | None = None
    for event in events[start + 1 :]:
        kind = type(event)
        if kind is ToolCall:
            open_calls[event.data.call_id] = event  # type: ignore[assignment]
        elif kind is ToolResult:
            open_calls.pop(event.data.call_id, None)
        elif kind is StepStart:
            open_step = event.data.step
        elif kind is StepEnd:
            open_step = None

    seq = next_seq
    closers: list[SessionEvent] = []
    for call in open_calls.values():
        d = call.data
        closers.append(
            ToolResult(
                seq,
                time,
                ToolResultData(
                    d.turn, d.step, d.call_id, [TextContent(INTERRUPTED_RESULT_TEXT)], True
                ),
                source_range=(call.seq, call.seq),
            )
        )
        seq += 1
    if open_step is not None:
        closers.append(StepEnd(seq, time, StepData(turn, open_step)))
        seq += 1
    closers.append(TurnEnd(seq, time, TurnEndData(turn, TurnEndReasonInterrupted())))
    return closers
