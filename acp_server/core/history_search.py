"""`search_history` without I/O (SPEC 4.3, 4.6): a regular expression over a session's own
messages and tool results, newest first, so details a compaction's summary left out can still
be found. The log keeps every event; this only reads it.

The pattern is a `LineRegex` (RE2: linear time); the search is blocking work for a worker
thread, and calls its `checkpoint` every `CHECK_EVERY` events and between pieces of a long text,
where a cancelled search stops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final

import msgspec

from .content import TextContent
from .events import AssistantMessageEvent, CommandResult, SessionEvent, ToolResult, UserMessageEvent
from .history import SearchHit, SearchKind
from .line_regex import LineRegex
from .stream import AssistantReasoning, AssistantText

CHECK_EVERY: Final = 256
"""Events searched between two calls of the search's checkpoint."""

LINE_CHARS: Final = 400
"""The most of one matching line a hit quotes."""


class Hit(msgspec.Struct, frozen=True):
    seq: int
    turn: int
    source: str
    """What the line is from: `user`, `assistant`, or `tool result <callId>`."""
    line: str


def _texts(event: SessionEvent) -> tuple[int, str, list[str]] | None:
    """The turn, the source and the texts of an event that holds conversation."""
    if type(event) is UserMessageEvent:
        blocks = event.data.message.content
        return event.data.turn, "user", [b.text for b in blocks if type(b) is TextContent]
    if type(event) is AssistantMessageEvent:
        texts = [
            b.text
            for b in event.data.message.content
            if type(b) is AssistantText or type(b) is AssistantReasoning
        ]
        return event.data.turn, "assistant", texts
    if type(event) is ToolResult:
        d = event.data
        texts = [b.text for b in d.content if type(b) is TextContent]
        return d.turn, f"tool result {d.call_id}", texts
    return None


def _carry_on() -> None:
    """The checkpoint of a search nothing cancels."""


def search_history(
    events: Iterable[SessionEvent],
    pattern: LineRegex,
    max_results: int,
    checkpoint: Callable[[], None] = _carry_on,
) -> tuple[list[Hit], bool]:
    """The lines matching `pattern`, newest message first (lines of one message in order),
    at most `max_results`; and whether more matched. Command turns are left out: they are not
    the conversation. What `checkpoint` raises ends the search."""
    events = list(events)
    commands = {e.data.turn for e in events if type(e) is CommandResult}
    hits: list[Hit] = []
    for index, event in enumerate(reversed(events)):
        if index % CHECK_EVERY == CHECK_EVERY - 1:
            checkpoint()
        found = _texts(event)
        if found is None or found[0] in commands:
            continue
        turn, source, texts = found
        lines = list(_lines(texts))
        # One more than there is room for says whether more matched.
        for at in pattern.search_lines(lines, max_results - len(hits) + 1, checkpoint):
            if len(hits) == max_results:
                return hits, True
            hits.append(Hit(event.seq, turn, source, _clip(lines[at])))
    return hits, False


def _lines(texts: list[str]) -> Iterator[str]:
    for text in texts:
        yield from text.splitlines()


def _clip(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "..."


def render_hits(hits: list[Hit], more: bool) -> str:
    """The tool's answer: one hit a line, then a note when the cap cut the list."""
    if not hits:
        return "No earlier message or tool result matches."
    lines = [f"[seq {h.seq}, turn {h.turn}, {h.source}] {h.line}" for h in hits]
    if more:
        lines.append(f"(only the newest {len(hits)} matches are shown; narrow the pattern)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# `session.search`.

SNIPPET_CHARS: Final = 160
"""The most of a matching line a snippet quotes (then cut around the match, marked `…`)."""

SNIPPET_LEAD: Final = 40
"""Characters a cut snippet keeps before the match."""


def _kinds(event: SessionEvent) -> list[tuple[SearchKind, list[str]]]:
    """The searchable texts of an event by kind, in the order a hit prefers them."""
    if type(event) is UserMessageEvent:
        blocks = event.data.message.content
        return [("user_message", [b.text for b in blocks if type(b) is TextContent])]
    if type(event) is AssistantMessageEvent:
        content = event.data.message.content
        return [
            ("agent_message", [b.text for b in content if type(b) is AssistantText]),
            ("agent_thought", [b.text for b in content if type(b) is AssistantReasoning]),
        ]
    if type(event) is ToolResult:
        return [("tool_result", [b.text for b in event.data.content if type(b) is TextContent])]
    return []


def snippet(line: str, span: tuple[int, int] | None) -> str:
    """The line as a hit quotes it: whole when short, else `SNIPPET_CHARS` of it around the
    match starting at `span`, a cut side marked `…`."""
    if len(line) <= SNIPPET_CHARS:
        return line
    at = span[0] if span is not None else 0
    start = max(0, at - SNIPPET_LEAD)
    end = min(len(line), start + SNIPPET_CHARS)
    start = max(0, end - SNIPPET_CHARS)
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")


class SessionSearch:
    """`session.search`'s matching: fed a session's events in batches, each batch in seq order
    and older than the one before, it keeps the newest `limit` matching events, one hit each
    (its first matching kind: an assistant message's text before its thoughts), and whether
    an older one matched too (`has_more`: then it is `done` and takes nothing more).

    Every turn counts, a command's or a rewound one's too: the hits point into the log as the
    history API pages it.
    """

    def __init__(self, pattern: LineRegex, limit: int) -> None:
        self.pattern = pattern
        self.limit = limit
        self.hits: list[SearchHit] = []
        self.has_more = False

    @property
    def done(self) -> bool:
        return self.has_more

    def feed(
        self, events: Sequence[SessionEvent], checkpoint: Callable[[], None] = _carry_on
    ) -> None:
        """Search one batch, newest event first; what `checkpoint` raises ends the search."""
        for index, event in enumerate(reversed(events)):
            if self.has_more:
                return
            if index % CHECK_EVERY == CHECK_EVERY - 1:
                checkpoint()
            hit = self._hit(event, checkpoint)
            if hit is None:
                continue
            if len(self.hits) == self.limit:
                self.has_more = True
                return
            self.hits.append(hit)

    def _hit(self, event: SessionEvent, checkpoint: Callable[[], None]) -> SearchHit | None:
        for kind, texts in _kinds(event):
            lines = list(_lines(texts))
            found = self.pattern.search_lines(lines, 1, checkpoint)
            if found:
                line = lines[found[0]]
                return SearchHit(event.seq, kind, snippet(line, self.pattern.span(line)))
        return None
