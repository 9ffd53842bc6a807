"""Forking a session (SPEC 4.7), as pure functions over its stored records.

A fork is a new session whose log starts with its parent's events `0..throughSeq`, kept with
their seqs and as the parent stored them, record for record: a chunk row that the fork point
cuts is clipped to the members it keeps (`paging.clip_row`), and expanded to plain events when
fewer than a row's minimum remain, as a writer would have stored them. Then comes
`session/forked`, and, when the cut fell inside a turn, the events recovery writes to close a
turn whose process died (SPEC 2.5): a step cut mid-stream stays as a failed stream leaves it
(its chunks, no `assistant/message`), a call without a result gets an "interrupted" one, and
the turn ends `interrupted`. So the fork's provider history is valid from its first prompt.

Where the fork is cut: by default through the parent's last completed turn (`default_point`);
or through a message (`message_point`) or any event (`seq_point`), that one included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast

from .acp_updates import command_message_id
from .chunk_rows import MIN_RUN, ROW_CLASSES, ChunkRow, StorageRecord, expand_row
from .events import (
    AssistantMessageEvent,
    CommandResult,
    SessionEvent,
    SessionForked,
    SessionForkedData,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from .paging import clip_records, record_count, record_start
from .recovery import interrupted_turn_closers


class ForkPointError(ValueError):
    """A fork point that names nothing in the session; `field` is the one that is wrong."""

    def __init__(self, field: Literal["seq", "messageId"], message: str) -> None:
        super().__init__(message)
        self.field = field


def _last_seq(records: Sequence[StorageRecord]) -> int:
    if not records:
        return -1
    last = records[-1]
    return record_start(last) + record_count(last) - 1


def default_point(records: Sequence[StorageRecord]) -> int:
    """Through the last completed turn: every event before the first turn that has no
    `turn/end` (one running now, or one whose process died), or every event when all turns
    have ended. -1 when that leaves nothing."""
    open_turn: int | None = None
    for record in records:
        kind = type(record)
        if kind is TurnStart:
            open_turn = cast(TurnStart, record).seq
        elif kind is TurnEnd:
            open_turn = None
    return open_turn - 1 if open_turn is not None else _last_seq(records)


def seq_point(records: Sequence[StorageRecord], seq: int) -> int:
    """Through the event `seq`, which the session must hold."""
    last = _last_seq(records)
    if seq > last:
        raise ForkPointError("seq", f"{seq} is past the session's last stored event (seq {last})")
    return seq


def message_point(records: Sequence[StorageRecord], message_id: str) -> int:
    """Through the message whose ACP `messageId` is `message_id`: a user message, an assistant
    message (its step's `assistant/message`) or a command's answer (its `command/result`)."""
    for record in records:
        kind = type(record)
        if kind is UserMessageEvent or kind is AssistantMessageEvent:
            event = cast("UserMessageEvent | AssistantMessageEvent", record)
            if event.data.message.id == message_id:
                return event.seq
        elif kind is CommandResult:
            result = cast(CommandResult, record)
            if command_message_id(result.data.turn) == message_id:
                return result.seq
    raise ForkPointError("messageId", f"the session has no message {message_id!r}")


def fork_prefix(records: Sequence[StorageRecord], through_seq: int) -> list[StorageRecord]:
    """The records of the events `0..through_seq`, as stored; a row the cut falls inside is
    clipped, or expanded when fewer than `MIN_RUN` of its members remain."""
    starts = [record_start(record) for record in records]
    kept = clip_records(records, starts, 0, through_seq + 1)
    if kept:
        last = kept[-1]
        # From seq 0 on, kept[i] is records[i] unless it was clipped.
        if type(last) in ROW_CLASSES and last is not records[len(kept) - 1]:
            row = cast(ChunkRow, last)
            if record_count(row) < MIN_RUN:
                kept[-1:] = expand_row(row)
    return kept


def fork_tail(
    prefix: Sequence[StorageRecord], from_session_id: str, through_seq: int, time: int
) -> list[SessionEvent]:
    """What follows the copied prefix: `session/forked`, then what closes a turn it cuts."""
    forked = SessionForked(through_seq + 1, time, SessionForkedData(from_session_id, through_seq))
    # The closers read turn, step and tool events only: rows (chunks) are left out.
    plain = [cast(SessionEvent, r) for r in prefix if type(r) not in ROW_CLASSES]
    return [forked, *interrupted_turn_closers(plain, through_seq + 2, time)]


def fork_records(
    records: Sequence[StorageRecord], from_session_id: str, through_seq: int, time: int
) -> list[StorageRecord]:
    """The whole log of a fork of `records` through `through_seq`, its records as stored."""
    prefix = fork_prefix(records, through_seq)
    return [*prefix, *fork_tail(prefix, from_session_id, through_seq, time)]
