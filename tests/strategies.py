"""Hypothesis strategies for realistic session event streams (SPEC 1).

`session_events()` draws a whole log body: contiguous seqs from any non-negative safe start,
times with positive, zero and negative gaps (and now and then a jump across the whole safe range,
so that a gap leaves it), runs of text, reasoning and tool-call deltas of every interesting length
(1, 2, 3 and long), interleaved with the plain events a real turn holds. Fragments include empty
strings, whitespace-only pieces and non-ASCII text. Some deltas carry `ignorable` or `sourceRange`
envelopes, which make them ineligible for packing.

Events are first drawn with a placeholder envelope (seq 0, time 0); `session_events` then lays
them out on contiguous seqs and drawn times.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
from hypothesis import strategies as st
from msgspec import UNSET

from acp_server.core.content import ImageContent, ResourceLink, TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    ContextCompaction,
    ContextCompactionData,
    ErrorInfo,
    PlanEntry,
    PlanUpdate,
    PlanUpdateData,
    SessionConfig,
    SessionConfigData,
    SessionContext,
    SessionContextData,
    SessionEvent,
    SessionForked,
    SessionForkedData,
    SessionMode,
    SessionModeData,
    SessionTitle,
    SessionTitleData,
    StepData,
    StepEnd,
    StepStart,
    SubagentStart,
    SubagentStartData,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCancelled,
    TurnEndReasonCompleted,
    TurnEndReasonError,
    TurnEndReasonInterrupted,
    TurnEndReasonMaxSteps,
    TurnEndReasonMaxTokens,
    TurnEndReasonRefusal,
    TurnStart,
    TurnStartData,
    UnknownEvent,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.stream import (
    AssistantReasoning,
    AssistantText,
    AssistantToolCall,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from acp_server.core.structs import MAX_SAFE_INTEGER

MAX = MAX_SAFE_INTEGER

# ---------------------------------------------------------------------------------------------
# Text.

_unicode = st.characters(exclude_categories=("Cs",))
"""Any code point a JSON string can carry as UTF-8 (surrogates excluded)."""

# fmt: off
PROSE_TOKENS = (
    "The", " quick", " brown", " fox", " jumps", ",", ".", "!", " über", " naïve", " café",
    "日本語", "の", "テキスト", " Ω", "—", "🙂", "👩‍💻", "\u00a0", "’s", " 1", "42", "\\", '"',  # noqa: RUF001 - typographic quote on purpose
)
# fmt: on
WHITESPACE = (" ", "  ", "\n", "\n\n", "\t", " \n ", "\r\n")
ARGUMENT_TOKENS = ('{"', "path", '":', ' "', "/tmp/ü b.txt", '"', ', "line', '": 3', "}", "[", "]")


def text_fragments() -> st.SearchStrategy[str]:
    """One streamed text or reasoning fragment, as providers cut them."""
    return st.one_of(
        st.just(""),
        st.sampled_from(WHITESPACE),
        st.sampled_from(PROSE_TOKENS),
        st.text(_unicode, max_size=6),
    )


def argument_fragments() -> st.SearchStrategy[str]:
    """One streamed fragment of a tool call's raw JSON arguments."""
    return st.one_of(
        st.just(""),
        st.sampled_from(ARGUMENT_TOKENS),
        st.sampled_from(WHITESPACE),
        st.text(_unicode, max_size=6),
    )


short_texts = st.text(_unicode, max_size=12)
ids = st.sampled_from(["call_1", "call_2", "toolu_01Ab", "é-id"])
small_ints = st.integers(0, 3)

# ---------------------------------------------------------------------------------------------
# Delta runs.


def _chunk_event(turn: int, step: int, chunk: Any) -> AssistantChunk:
    return AssistantChunk(0, 0, AssistantChunkData(turn, step, chunk))


@st.composite
def delta_runs(
    draw: st.DrawFn, turn: int | None = None, step: int | None = None, index: int | None = None
) -> list[AssistantChunk]:
    """A run of deltas of one block, some members made ineligible by their envelope.

    Long runs cycle through a drawn pool of fragments, which keeps the draw small. Tool-call
    runs name the tool on every member, on none, or only on the first (the common provider
    shape, which splits the run). `turn`, `step` and `index` are drawn unless given.
    """
    kind = draw(st.sampled_from(["text", "reasoning", "tool-call"]))
    turn = draw(small_ints) if turn is None else turn
    step = draw(small_ints) if step is None else step
    index = draw(small_ints) if index is None else index
    length = draw(st.one_of(st.sampled_from([1, 2, 3]), st.integers(1, 12), st.integers(30, 150)))
    pool_strategy = argument_fragments() if kind == "tool-call" else text_fragments()
    pool = draw(st.lists(pool_strategy, min_size=1, max_size=min(length, 12)))
    fragments = [pool[k % len(pool)] for k in range(length)]
    if kind == "tool-call":
        call_id = draw(ids)
        name = draw(st.sampled_from(["read_file", "run_command", ""]))
        naming = draw(st.sampled_from(["none", "all", "first"]))
        names = [
            name if naming == "all" or (naming == "first" and k == 0) else UNSET
            for k in range(length)
        ]
        chunks: list[Any] = [
            ToolCallDelta(index, call_id, fragment, n)
            for fragment, n in zip(fragments, names, strict=True)
        ]
    else:
        delta = TextDelta if kind == "text" else ReasoningDelta
        chunks = [delta(index, fragment) for fragment in fragments]
    events = [_chunk_event(turn, step, chunk) for chunk in chunks]
    marks = draw(
        st.lists(
            st.tuples(
                st.integers(0, length - 1), st.sampled_from(["ignorable", "sourceRange", "both"])
            ),
            max_size=2,
        )
    )
    for position, mark in marks:
        event = events[position]
        if mark in ("ignorable", "both"):
            event = msgspec.structs.replace(event, ignorable=True)
        if mark in ("sourceRange", "both"):
            event = msgspec.structs.replace(event, source_range=(0, 0))
        events[position] = event
    return events


# ---------------------------------------------------------------------------------------------
# Plain events.

turn_end_reasons = st.one_of(
    st.builds(TurnEndReasonCompleted),
    st.builds(TurnEndReasonCancelled),
    st.builds(TurnEndReasonMaxTokens),
    st.builds(TurnEndReasonRefusal),
    st.builds(TurnEndReasonMaxSteps),
    st.builds(TurnEndReasonInterrupted),
    st.builds(
        TurnEndReasonError,
        st.builds(ErrorInfo, short_texts, st.sampled_from([UNSET, -32603, "E_TIMEOUT"])),
    ),
)

content_blocks = st.one_of(
    st.builds(TextContent, short_texts),
    st.builds(ImageContent, st.just("aGk="), st.just("image/png")),
    st.builds(ResourceLink, st.just("file:///tmp/a.txt"), st.just("a.txt")),
)

assistant_blocks = st.one_of(
    st.builds(AssistantText, short_texts),
    st.builds(AssistantReasoning, short_texts),
    st.builds(AssistantToolCall, ids, st.just("read_file"), st.just('{"path":"a"}')),
)

usages = st.builds(Usage, small_ints, small_ints, st.sampled_from([UNSET, 0, 7]))
source_ranges = st.sampled_from([UNSET, (0, 0), (3, 9)])


def _event(cls: type, data: Any, source_range: Any = UNSET) -> Any:
    return cls(0, 0, data, source_range=source_range)


def plain_events() -> st.SearchStrategy[SessionEvent]:
    """One event that is never a packable delta (placeholder envelope)."""
    non_delta_chunks = st.one_of(
        st.builds(BlockStart, small_ints, st.sampled_from(["text", "reasoning", "tool-call"])),
        st.builds(BlockEnd, small_ints),
        st.builds(UsageChunk, usages),
        st.builds(Finish, st.sampled_from(["stop", "tool-calls", "length", "content-filter"])),
    )
    return st.one_of(
        st.builds(lambda t: _event(TurnStart, TurnStartData(t)), small_ints),
        st.builds(lambda t, r: _event(TurnEnd, TurnEndData(t, r)), small_ints, turn_end_reasons),
        st.builds(lambda t, s: _event(StepStart, StepData(t, s)), small_ints, small_ints),
        st.builds(lambda t, s: _event(StepEnd, StepData(t, s)), small_ints, small_ints),
        st.builds(
            lambda t, c: _event(UserMessageEvent, UserMessageData(t, UserMessage("u1", c))),
            small_ints,
            st.lists(content_blocks, max_size=3),
        ),
        st.builds(
            lambda t, s, c, u, i, r: _event(
                AssistantMessageEvent,
                AssistantMessageData(t, s, AssistantMessage("m1", c), u, i),
                r,
            ),
            small_ints,
            small_ints,
            st.lists(assistant_blocks, max_size=3),
            st.one_of(st.just(UNSET), usages),
            st.sampled_from([UNSET, True]),
            source_ranges,
        ),
        st.builds(
            lambda t, s, i, a: _event(ToolCall, ToolCallData(t, s, i, "read_file", a)),
            small_ints,
            small_ints,
            ids,
            short_texts,
        ),
        st.builds(
            lambda t, s, i, c, e, o, r: _event(ToolResult, ToolResultData(t, s, i, c, e, o), r),
            small_ints,
            small_ints,
            ids,
            st.lists(content_blocks, max_size=2),
            st.sampled_from([UNSET, True]),
            st.sampled_from([UNSET, None, {"exitCode": 0}, "ok"]),
            source_ranges,
        ),
        st.builds(
            lambda c: _event(PlanUpdate, PlanUpdateData([PlanEntry(c, "high", "pending")])),
            short_texts,
        ),
        st.builds(lambda t: _event(SessionTitle, SessionTitleData(t)), short_texts),
        st.builds(
            lambda t, s: _event(
                SubagentStart, SubagentStartData(t, s, "call_1", "child-1", "one-shot")
            ),
            small_ints,
            small_ints,
        ),
        st.builds(lambda m: _event(SessionMode, SessionModeData(m)), short_texts),
        st.builds(
            lambda c, v: _event(SessionConfig, SessionConfigData(c, v)),
            short_texts,
            st.one_of(short_texts, st.booleans()),
        ),
        st.builds(
            lambda t, c, b, e: _event(CommandResult, CommandResultData(t, c, b, e)),
            small_ints,
            short_texts,
            st.lists(content_blocks, max_size=2),
            st.sampled_from([UNSET, True]),
        ),
        st.builds(
            lambda t, s, q: _event(ContextCompaction, ContextCompactionData(t, s, q)),
            small_ints,
            small_ints,
            st.integers(0, 40),
        ),
        st.builds(
            lambda m, t: _event(SessionContext, SessionContextData([], m, [TextContent(t)])),
            st.sampled_from(["append", "override"]),
            short_texts,
        ),
        st.builds(
            lambda p, q: _event(SessionForked, SessionForkedData(p, q)),
            st.sampled_from(["parent-1", "0f3a"]),
            st.integers(-1, 40),
        ),
        st.builds(lambda t, s, c: _chunk_event(t, s, c), small_ints, small_ints, non_delta_chunks),
        st.builds(
            lambda d: UnknownEvent("future/event", 0, 0, d, True),
            st.sampled_from([{}, {"turn": 1, "note": "ü"}, [1, 2], None]),
        ),
    )


def _assembled(run: list[AssistantChunk]) -> Any:
    """The assistant block a loop would assemble from one block's deltas."""
    first = run[0].data.chunk
    if isinstance(first, ToolCallDelta):
        arguments = "".join(e.data.chunk.arguments_delta for e in run)  # type: ignore[union-attr]  # a run holds deltas of one type
        return AssistantToolCall(first.id, first.name or "read_file", arguments)
    text = "".join(e.data.chunk.text for e in run)  # type: ignore[union-attr]  # a run holds deltas of one type
    return AssistantText(text) if isinstance(first, TextDelta) else AssistantReasoning(text)


_BLOCK_TYPES = {TextDelta: "text", ReasoningDelta: "reasoning", ToolCallDelta: "tool-call"}


@st.composite
def turns(draw: st.DrawFn) -> list[SessionEvent]:
    """One whole turn of one step, shaped as the loop writes it.

    turn/start, user/message, step/start, then per block: block-start, its deltas, block-end;
    then usage, finish, the assembled assistant/message (with its chunks' range), step/end and
    turn/end. Sometimes two tool calls stream interleaved, one delta each in turn.
    """
    turn, step = draw(small_ints), draw(small_ints)
    runs = draw(
        st.lists(
            st.integers(0, 3).flatmap(lambda index: delta_runs(turn, step, index)),
            min_size=1,
            max_size=3,
        )
    )
    chunks: list[SessionEvent] = []
    for run in runs:
        index = run[0].data.chunk.index
        block_type = _BLOCK_TYPES[type(run[0].data.chunk)]
        chunks.append(_chunk_event(turn, step, BlockStart(index, block_type)))
        chunks.extend(run)
        chunks.append(_chunk_event(turn, step, BlockEnd(index)))
    if draw(st.booleans()):
        interleaved = [
            _chunk_event(turn, step, ToolCallDelta(4 + k % 2, f"call_{k % 2}", fragment))
            for k, fragment in enumerate(draw(st.lists(argument_fragments(), max_size=6)))
        ]
        chunks.extend(interleaved)
    chunks.append(_chunk_event(turn, step, UsageChunk(Usage(12, 34))))
    chunks.append(_chunk_event(turn, step, Finish("stop")))
    message = AssistantMessage("m1", [_assembled(run) for run in runs])
    return [
        _event(TurnStart, TurnStartData(turn)),
        _event(UserMessageEvent, UserMessageData(turn, UserMessage("u1", [TextContent("Hi")]))),
        _event(StepStart, StepData(turn, step)),
        *chunks,
        # The range is relative to the turn here; it is not checked by the codec.
        _event(
            AssistantMessageEvent, AssistantMessageData(turn, step, message), (3, 2 + len(chunks))
        ),
        _event(StepEnd, StepData(turn, step)),
        _event(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted())),
    ]


# ---------------------------------------------------------------------------------------------
# Envelopes and whole streams.

_FLIP = "flip"
time_gaps = st.one_of(
    st.integers(0, 40), st.just(0), st.integers(-25, -1), st.integers(1000, 10**6), st.just(_FLIP)
)
"""Gaps between consecutive times; a flip jumps to the far end of the safe range."""


@st.composite
def envelopes(draw: st.DrawFn, count: int) -> tuple[int, list[int]]:
    """A first seq such that `count` contiguous seqs stay safe, and `count` times."""
    last_start = MAX - max(count - 1, 0)
    seq0 = draw(
        st.one_of(
            st.just(0), st.integers(0, 10**6), st.just(last_start), st.integers(0, last_start)
        )
    )
    time = draw(
        st.one_of(
            st.just(0), st.integers(1_700_000_000_000, 1_800_000_000_000), st.integers(-MAX, MAX)
        )
    )
    times = []
    for gap in draw(st.lists(time_gaps, min_size=count, max_size=count)):
        time = (-MAX if time > 0 else MAX) if gap == _FLIP else max(-MAX, min(MAX, time + gap))
        times.append(time)
    return seq0, times


@st.composite
def session_events(draw: st.DrawFn, max_segments: int = 16) -> list[SessionEvent]:
    """A log body: whole turns, loose delta runs and plain events, on contiguous seqs."""
    segments = draw(
        st.lists(
            st.one_of(delta_runs(), turns(), plain_events().map(lambda event: [event])),
            max_size=max_segments,
        )
    )
    body = [event for segment in segments for event in segment]
    seq0, times = draw(envelopes(len(body)))
    return [
        msgspec.structs.replace(event, seq=seq0 + k, time=time)
        for k, (event, time) in enumerate(zip(body, times, strict=True))
    ]


@st.composite
def batch_cuts(draw: st.DrawFn, count: int) -> list[int]:
    """Sorted cut positions that split a sequence of `count` items into append batches."""
    return sorted(draw(st.sets(st.integers(0, count), max_size=8)))


def split(items: list[Any], cuts: list[int]) -> list[list[Any]]:
    """`items` cut at the given positions (empty batches included, as a writer may flush one)."""
    bounds = [0, *cuts, len(items)]
    return [items[a:b] for a, b in itertools.pairwise(bounds)]


def streamed_turn(turn: int, first: int, deltas: int) -> list[SessionEvent]:
    """A completed turn from seq `first` whose one step streams `deltas` text deltas ("0 ",
    "1 "...) between its block marks, then its message."""
    events: list[Any] = [
        TurnStart(first, 0, TurnStartData(turn)),
        UserMessageEvent(first + 1, 0, UserMessageData(turn, UserMessage(f"u{turn}", []))),
        StepStart(first + 2, 0, StepData(turn, 0)),
        AssistantChunk(first + 3, 0, AssistantChunkData(turn, 0, BlockStart(0, "text"))),
    ]
    events += [
        AssistantChunk(first + 4 + k, k, AssistantChunkData(turn, 0, TextDelta(0, f"{k} ")))
        for k in range(deltas)
    ]
    seq = first + 4 + deltas
    text = "".join(f"{k} " for k in range(deltas))
    message = AssistantMessage(f"a{turn}", [AssistantText(text)])
    events += [
        AssistantChunk(seq, 0, AssistantChunkData(turn, 0, BlockEnd(0))),
        AssistantMessageEvent(seq + 1, 0, AssistantMessageData(turn, 0, message)),
        StepEnd(seq + 2, 0, StepData(turn, 0)),
        TurnEnd(seq + 3, 0, TurnEndData(turn, TurnEndReasonCompleted())),
    ]
    return events


# ---------------------------------------------------------------------------------------------
# Logs shaped as the loop writes them: turns that complete, are cancelled, fail, crash (closed
# by recovery), run commands, and compact (by `/compact` or before a model call).

TURN_ENDINGS = ("completed", "cancelled-stream", "cancelled-tool", "failed", "crash", "stop-calls")


class _LogBuilder:
    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self.turn = 0

    def add(self, cls: type, data: Any) -> None:
        self.events.append(cls(len(self.events), 0, data))

    @property
    def last_seq(self) -> int:
        return len(self.events) - 1

    def message(self, turn: int, step: int, blocks: list[Any], **extra: Any) -> None:
        message = AssistantMessage(f"m{turn}.{step}", blocks)
        self.add(AssistantMessageEvent, AssistantMessageData(turn, step, message, **extra))

    def summary_step(self, turn: int, step: int, through: int, outcome: str) -> None:
        """A summarising step, then its compaction unless it was cut short."""
        self.add(StepStart, StepData(turn, step))
        self.add(AssistantChunk, AssistantChunkData(turn, step, TextDelta(0, "sum")))
        if outcome == "cancelled":
            self.message(turn, step, [AssistantText("sum")], interrupted=True)
        elif outcome == "done":
            self.message(turn, step, [AssistantText(f"summary {turn}.{step}")], usage=Usage(9, 1))
        self.add(StepEnd, StepData(turn, step))
        if outcome == "done":
            self.add(ContextCompaction, ContextCompactionData(turn, step, through))


@st.composite
def loop_logs(draw: st.DrawFn, max_turns: int = 6) -> list[SessionEvent]:
    """A session log on seqs from 0 whose turns end in every way the loop and recovery know."""
    log = _LogBuilder()
    for turn in range(draw(st.integers(0, max_turns))):
        kind = draw(st.sampled_from(["prompt", "prompt", "command", "compact"]))
        before_turn = log.last_seq
        log.add(TurnStart, TurnStartData(turn))
        text = "/compact" if kind == "compact" else f"prompt {turn}"
        log.add(
            UserMessageEvent, UserMessageData(turn, UserMessage(f"u{turn}", [TextContent(text)]))
        )
        if kind == "command":
            log.add(CommandResult, CommandResultData(turn, "title", [TextContent("Title set")]))
            log.add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
            continue
        if kind == "compact":
            outcome = draw(st.sampled_from(["done", "done", "cancelled", "failed"]))
            log.summary_step(turn, 0, before_turn, outcome)
            if outcome == "done":
                log.add(CommandResult, CommandResultData(turn, "compact", [TextContent("ok")]))
            reason: Any = (
                TurnEndReasonCompleted() if outcome == "done" else TurnEndReasonCancelled()
            )
            log.add(TurnEnd, TurnEndData(turn, reason))
            continue
        _prompt_turn(draw, log, turn, before_turn)
    return log.events


def _prompt_turn(draw: st.DrawFn, log: _LogBuilder, turn: int, before_turn: int) -> None:
    ending = draw(st.sampled_from(TURN_ENDINGS))
    tool_steps = draw(st.integers(0, 2))
    step = 0
    if draw(st.booleans()):  # compacted before the first model call: the prompt stays after it
        log.summary_step(turn, step, before_turn, draw(st.sampled_from(["done", "cancelled"])))
        step += 1
    for _ in range(tool_steps):
        if draw(st.booleans()):  # compacted between steps: the results are summarised too
            log.summary_step(turn, step, log.last_seq, "done")
            step += 1
        ids = [f"call_{turn}_{step}_{k}" for k in range(draw(st.integers(1, 2)))]
        calls = [AssistantToolCall(i, "read_file", "{}") for i in ids]
        log.add(StepStart, StepData(turn, step))
        log.add(AssistantChunk, AssistantChunkData(turn, step, ToolCallDelta(0, ids[0], "{}")))
        log.message(turn, step, [AssistantText("looking"), *calls])
        for i in ids:
            log.add(ToolCall, ToolCallData(turn, step, i, "read_file", "{}"))
        if ending == "crash" and draw(st.booleans()):  # died while a tool ran
            log.add(TurnEnd, TurnEndData(turn, TurnEndReasonInterrupted()))
            return
        if ending == "cancelled-tool":
            for k, i in enumerate(ids):
                content: list[Any] = [TextContent("cancelled" if k else f"read {i}")]
                log.add(ToolResult, ToolResultData(turn, step, i, content, True if k else UNSET))
            log.add(StepEnd, StepData(turn, step))
            log.add(TurnEnd, TurnEndData(turn, TurnEndReasonCancelled()))
            return
        for i in ids:
            log.add(ToolResult, ToolResultData(turn, step, i, [TextContent(f"read {i}")]))
        log.add(StepEnd, StepData(turn, step))
        step += 1
    log.add(StepStart, StepData(turn, step))
    log.add(AssistantChunk, AssistantChunkData(turn, step, TextDelta(0, "ans")))
    if ending == "failed":
        log.add(StepEnd, StepData(turn, step))
        log.add(TurnEnd, TurnEndData(turn, TurnEndReasonError(ErrorInfo("provider failed"))))
        return
    if ending == "cancelled-stream":
        blocks: list[Any] = draw(st.sampled_from([[], [AssistantText("an")]]))
        log.message(turn, step, blocks, interrupted=True)
        log.add(StepEnd, StepData(turn, step))
        log.add(TurnEnd, TurnEndData(turn, TurnEndReasonCancelled()))
        return
    if ending == "crash":
        log.add(TurnEnd, TurnEndData(turn, TurnEndReasonInterrupted()))
        return
    blocks = [AssistantText(f"answer {turn}")]
    if ending == "stop-calls":  # the model called a tool but finished with `stop`
        blocks.append(AssistantToolCall(f"call_{turn}_{step}_x", "read_file", "{}"))
    log.message(turn, step, blocks, usage=Usage(50, 5))
    log.add(StepEnd, StepData(turn, step))
    log.add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
