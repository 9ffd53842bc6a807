"""Closing a turn whose process died (SPEC 2.5), as a pure function over the log's events."""

from __future__ import annotations

from collections.abc import Sequence

from .content import TextContent
from .events import (
    SessionEvent,
    StepData,
    StepEnd,
    StepStart,
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
    turn = 0
    for i in range(len(events) - 1, -1, -1):
        candidate = events[i]
        if type(candidate) is TurnEnd:
            return []
        if type(candidate) is TurnStart:
            start = i
            turn = candidate.data.turn
            break
    if start is None:
        return []
    open_calls: dict[str, ToolCall] = {}
    open_step: int | None = None
    for event in events[start + 1 :]:
        if type(event) is ToolCall:
            open_calls[event.data.call_id] = event
        elif type(event) is ToolResult:
            open_calls.pop(event.data.call_id, None)
        elif type(event) is StepStart:
            open_step = event.data.step
        elif type(event) is StepEnd:
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
