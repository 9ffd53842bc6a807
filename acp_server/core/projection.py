"""The load projection (SPEC 4.2): a session's events as the `session/update`s that replay it.

The replay shows completed content, not a token tape: each step's `assistant/message` as whole
blocks (thoughts, text, then each tool call followed by its result), and for a step whose
stream failed or was cut by a crash, the text and reasoning its chunks had delivered. Plans and
the title are shown where they happened, and a command's answer as an agent message. A
compaction's summarising step is shown as one agent message saying the conversation was
compacted, with the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import msgspec

from .acp_updates import (
    AgentMessageChunk,
    AgentThoughtChunk,
    PlanShown,
    SessionInfoUpdate,
    SessionUpdate,
    ToolPresenter,
    UserMessageChunk,
    assistant_message_id,
    command_message_id,
    tool_call_finished,
    tool_call_started,
    unknown_tool_presentation,
)
from .assembly import MessageAssembler
from .chunk_checks import KeptRecord, PackedChunks
from .chunk_rows import ROW_CLASSES, ChunkRow
from .compaction import COMPACTED_NOTICE, summary_text
from .event_log import EventLog
from .events import (
    AssistantBlock,
    AssistantChunk,
    AssistantMessageEvent,
    AssistantReasoning,
    AssistantText,
    AssistantToolCall,
    CommandResult,
    ContextCompaction,
    PlanUpdate,
    SessionTitle,
    StepEnd,
    StepStart,
    TextContent,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)


def project_load(
    records: Sequence[KeptRecord], present: ToolPresenter = unknown_tool_presentation
) -> list[SessionUpdate]:
    """The updates that replay `records` (events, chunk rows left packed, or `PackedChunks`),
    in log order.

    Tool calls are shown as `present` (the session's tool registry) says.

    The records must start at a turn boundary (see `tail_start`), so no step is cut in two.
    Rows are never expanded: a completed step's rows and chunks are only set aside (its
    message stands for them), a failed step's are assembled into its partial text (its
    `PackedChunks` decoded for that).
    """
    results = {
        (e.data.turn, e.data.step, e.data.call_id): e for e in records if type(e) is ToolResult
    }
    summaries = {(e.data.turn, e.data.step) for e in records if type(e) is ContextCompaction}
    updates: list[SessionUpdate] = []
    # The chunk records of the current step, kept until we know whether a message will stand
    # for them; only a step that ends without one pays for assembling them.
    pending: list[AssistantChunk | ChunkRow | PackedChunks] = []

    def flush_pending() -> None:
        if pending:
            chunks: list[AssistantChunk | ChunkRow] = []
            for held in pending:
                if type(held) is PackedChunks:
                    chunks.extend(cast("list[AssistantChunk | ChunkRow]", held.decode()))
                else:
                    chunks.append(held)
            d = chunks[0].data
            assembler = MessageAssembler()
            for record in chunks:
                if isinstance(record, AssistantChunk):
                    assembler.feed(record.data.chunk)
                else:
                    assembler.feed_row(record)
            updates.extend(
                _show_blocks(
                    assembler.content(interrupted=True), assistant_message_id(d.turn, d.step)
                )
            )
            pending.clear()

    for event in records:
        kind = type(event)
        if kind is AssistantChunk or kind is PackedChunks or kind in ROW_CLASSES:
            pending.append(cast("AssistantChunk | ChunkRow | PackedChunks", event))
        elif type(event) is AssistantMessageEvent:
            pending.clear()  # the message stands for its chunks
            d = event.data
            message = d.message
            if (d.turn, d.step) in summaries:
                # The mark of a compaction (SPEC 4.6): what the model was given instead of
                # everything before it.
                notice = TextContent(COMPACTED_NOTICE + summary_text(event))
                updates.append(AgentMessageChunk(notice, message.id))
                continue
            updates.extend(_show_blocks(message.content, message.id))
            for block in message.content:
                if type(block) is AssistantToolCall:
                    updates.append(
                        tool_call_started(block.id, block.name, block.arguments, present)
                    )
                    result = results.get((d.turn, d.step, block.id))
                    if result is not None:
                        updates.append(tool_call_finished(result.data, block.name))
        elif kind in (StepEnd, StepStart, TurnEnd, TurnStart):
            flush_pending()
        elif type(event) is UserMessageEvent:
            flush_pending()
            user_message = event.data.message
            updates.extend(
                UserMessageChunk(block, user_message.id) for block in user_message.content
            )
        elif type(event) is PlanUpdate:
            updates.append(PlanShown(event.data.entries))
        elif type(event) is SessionTitle:
            updates.append(SessionInfoUpdate(event.data.title))
        elif type(event) is CommandResult:
            message_id = command_message_id(event.data.turn)
            updates.extend(AgentMessageChunk(block, message_id) for block in event.data.content)
    flush_pending()
    return updates


def _show_blocks(content: Sequence[AssistantBlock], message_id: str) -> list[SessionUpdate]:
    shown: list[SessionUpdate] = []
    for block in content:
        if not getattr(block, "text", ""):
            continue  # an empty block showed nothing live either
        if type(block) is AssistantReasoning:
            shown.append(AgentThoughtChunk(TextContent(block.text), message_id))
        elif type(block) is AssistantText:
            shown.append(AgentMessageChunk(TextContent(block.text), message_id))
    return shown


class TailCut(msgspec.Struct, frozen=True):
    start: int
    """The seq the replay starts at (`replayedFromSeq`)."""
    has_more: bool


def tail_start(log: EventLog, max_messages: int) -> TailCut:
    """Where a replay of the newest `max_messages` messages starts.

    Counts `user/message` and `assistant/message` events from the end; the cut then moves back
    to the `turn/start` of the turn holding the last one counted, so whole turns are replayed
    (never a tool call without its result, never a step without its start).
    """
    if max_messages < 1:
        raise ValueError("max_messages must be positive")
    if len(log.message_seqs) < max_messages:
        return TailCut(0, False)
    cut = log.turn_start_before(log.message_seqs[-max_messages])
    return TailCut(cut, cut > 0)
