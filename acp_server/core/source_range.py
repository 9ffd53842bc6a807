"""The rules of `sourceRange` (SPEC 1.1), checked the same way by every reader of a log.

A `sourceRange` names earlier seqs, in order. On an `assistant/message` it names its step's
chunks, so it ends just before the message; on a `tool/result` it is `[s, s]`, s being the seq
of the `tool/call` it answers. A range that breaks these would make a history page cut at the
wrong seq (the page cut reaches back to the start of every message's range), so a log holding
one is corrupt for the loader, the history pages and `log verify` alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from .events import AssistantMessageEvent, ToolCall, ToolResult


def source_range_problem(
    record: object, seq: int, call_ids: Mapping[int, str] | None
) -> str | None:
    """What is wrong with the `sourceRange` of `record` (whose seq is `seq`), or None.

    `call_ids` maps the seq of every earlier `tool/call` to its call id. A reader that does not
    read the log from its start (a history page reads backwards) passes None: the `tool/result`
    range is then checked for its shape only, not for the call it names.
    """
    source = getattr(record, "source_range", None)
    if not isinstance(source, tuple):
        return None
    first, last = source
    if not first <= last < seq:
        return f"sourceRange [{first}, {last}] must name earlier seqs in order"
    if type(record) is ToolResult:
        call_id = call_ids.get(first) if call_ids is not None else None
        if first != last or (call_ids is not None and call_id is None):
            return (
                f"sourceRange [{first}, {last}] of a tool/result must be [s, s] with s a tool/call"
            )
        answered = record.data.call_id
        if call_id is not None and call_id != answered:
            return f"tool/result for {answered!r} points at the tool/call of {call_id!r}"
    elif type(record) is AssistantMessageEvent and last != seq - 1:
        return f"sourceRange [{first}, {last}] of an assistant/message must end just before it"
    return None


class SourceRanges:
    """`source_range_problem` for a reader that reads a log from its start, record by record:
    it remembers the `tool/call`s seen so far."""

    def __init__(self) -> None:
        self.call_ids: dict[int, str] = {}

    def problem(self, record: object, seq: int) -> str | None:
        """Check `record`, then remember it if it is a `tool/call`."""
        problem = source_range_problem(record, seq, self.call_ids)
        if type(record) is ToolCall:
            self.call_ids[seq] = record.data.call_id
        return problem
