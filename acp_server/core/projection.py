"""The load projection (SPEC 4.2): a session's events as the `session/update`s that replay it.

The replay shows completed content, not a token tape: each step's `assistant/message` as whole
blocks (thoughts, text, then each tool call followed by its result), and for a step whose
stream failed or was cut by a crash, the text and reasoning its chunks had delivered. Plans and
the title are shown where they happened, and a command's answer as an agent message. A
compaction's summarising step is shown as one agent message saying the conversation was
compacted, with the summary; to a client that takes compactions (`session.compaction`), as a
completed `compaction_update` holding the summary. Notices are live only: never replayed. A
tool output over 64 KiB is replayed cut, saying where the whole is (`output_cut`).

A client that advertised the unstable schema's newer shapes gets them in the same places: a
plan as `plan_update` / `plan_removed` (`plan_operations`), and a `task` call's child as
`subagent_update` and `session_message` around the call's result (`subagents`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import cast

import msgspec

from .acp_updates import (
    AgentMessageChunk,
    AgentThoughtChunk,
    CompactionShown,
    SessionInfoUpdate,
    SessionUpdate,
    ToolPresenter,
    UserMessageChunk,
    assistant_message_id,
    command_message_id,
    compaction_id,
    plan_shown,
    tool_call_finished,
    tool_call_started,
    unknown_tool_presentation,
)
from .assembly import MessageAssembler
from .chunk_checks import KeptRecord, PackedChunks
from .chunk_rows import ROW_CLASSES, ChunkRow
from .compaction import COMPACTED_NOTICE, summary_text
from .content import ContentBlock, TextContent
from .event_log import EventLog
from .events import (
    AssistantChunk,
    AssistantMessageEvent,
    CommandResult,
    ContextCompaction,
    PlanUpdate,
    SessionTitle,
    StepEnd,
    StepStart,
    SubagentStart,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from .output_cut import cut_output
from .stream import AssistantBlock, AssistantReasoning, AssistantText, AssistantToolCall
from .subagent_updates import subagent_finished, subagent_started, task_prompt


def project_load(
    records: Sequence[KeptRecord],
    present: ToolPresenter = unknown_tool_presentation,
    *,
    compactions: bool = False,
    plan_operations: bool = False,
    subagents: bool = False,
    session_id: str = "",
    foreign_children: Collection[str] = (),
) -> list[SessionUpdate]:
    """The updates that replay `records` (events, chunk rows left packed, or `PackedChunks`),
    in log order.

    Tool calls are shown as `present` (the session's tool registry) says; compactions as
    `compaction_update`s when `compactions` (the client advertised `session.compaction`),
    else as an agent message. With `plan_operations` plans are shown as `plan_update` /
    `plan_removed`; with `subagents` each `task` call's child is shown between the call and its
    result as the live turn showed it, on the session `session_id`, except `foreign_children`
    (children whose own log names another parent, as a fork's copied `subagent/start`s do:
    never announced as this one's). A tool output over 64 KiB is shown cut, its
    `tool_call_update` saying where the whole is (`output_cut`).

    The records must start at a turn boundary (see `tail_start`), so no step is cut in two.
    Rows are never expanded: a completed step's rows and chunks are only set aside (its
    message stands for them), a failed step's are assembled into its partial text (its
    `PackedChunks` decoded for that).
    """
    results = {
        (e.data.turn, e.data.step, e.data.call_id): e for e in records if type(e) is ToolResult
    }
    summaries = {(e.data.turn, e.data.step) for e in records if type(e) is ContextCompaction}
    children = (
        {
            (e.data.turn, e.data.step, e.data.call_id): e.data.child_session_id
            for e in records
            if type(e) is SubagentStart and e.data.child_session_id not in foreign_children
        }
        if subagents
        else {}
    )
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
                if compactions:
                    summary: list[ContentBlock] = [TextContent(summary_text(event))]
                    shown = compaction_id(d.turn, d.step)
                    updates.append(CompactionShown(shown, "completed", summary))
                    continue
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
                    child = children.get((d.turn, d.step, block.id))
                    if child is not None:
                        prompt = task_prompt(block.arguments)
                        updates.extend(subagent_started(session_id, child, prompt))
                        if result is not None:
                            updates.extend(subagent_finished(session_id, child, result.data))
                    if result is not None:
                        updates.append(_result_shown(result, block.name))
        elif kind in (StepEnd, StepStart, TurnEnd, TurnStart):
            flush_pending()
        elif type(event) is UserMessageEvent:
            flush_pending()
            user_message = event.data.message
            updates.extend(
                UserMessageChunk(block, user_message.id) for block in user_message.content
            )
        elif type(event) is PlanUpdate:
            updates.append(plan_shown(event.data.entries, plan_operations))
        elif type(event) is SessionTitle:
            updates.append(SessionInfoUpdate(event.data.title))
        elif type(event) is CommandResult:
            message_id = command_message_id(event.data.turn)
            updates.extend(AgentMessageChunk(block, message_id) for block in event.data.content)
    flush_pending()
    return updates


def _result_shown(result: ToolResult, name: str) -> SessionUpdate:
    shown, cut = cut_output(result.data, result.seq)
    update = tool_call_finished(shown, name)
    if cut is None:
        return update
    meta = {"acp-server": {"cut": msgspec.to_builtins(cut)}}
    return msgspec.structs.replace(update, meta=meta)


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
