"""The patterns of `grep` and `search_history` (SPEC 4.3) are matched in linear time (RE2): a
catastrophic pattern for a backtracking engine finishes with the right lines, a construct RE2
lacks is an error result saying so, and the searches run in worker threads that stop at a
checkpoint when cancelled."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import pytest

from acp_server.agent.tools import BUILTIN_TOOLS, ToolContext, ToolOutcome, run_tool
from acp_server.agent.tools import history as history_tool
from acp_server.agent.tools.search import GrepArgs, grep
from acp_server.core.content import TextContent
from acp_server.core.events import (
    CommandResult,
    CommandResultData,
    SessionEvent,
    SessionRewind,
    SessionRewindData,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.history_search import Hit, search_history
from acp_server.core.line_regex import PIECE_BYTES, LineRegex, PatternError

CATASTROPHIC = "(a+)+$"
"""Exponential for a backtracking engine on a line of `a`s that ends in another character."""

UNSUPPORTED_TAIL = (
    " (the syntax is RE2's, matched in linear time: backreferences, lookahead, lookbehind, "
    "atomic groups and possessive repeats are not supported)"
)


class NoClient:
    capabilities: Any = None

    async def request(self, method: str, params: Any) -> Any:
        raise AssertionError(method)

    async def notify(self, method: str, params: Any) -> None:
        raise AssertionError(method)


class Stop(Exception):
    """What a test's checkpoint raises, as a cancelled worker thread's does."""


async def _started() -> None:
    pass


async def call(ctx: ToolContext, name: str, arguments: dict[str, Any]) -> ToolOutcome:
    return await run_tool(
        BUILTIN_TOOLS,
        ctx,
        "call-1",
        name,
        msgspec.json.encode(arguments).decode(),
        title=name,
        kind="search",
        on_started=_started,
    )


def history(*texts: str) -> list[SessionEvent]:
    return [
        ToolResult(seq, 0, ToolResultData(0, 0, f"call_{seq}", [TextContent(text)]))
        for seq, text in enumerate(texts)
    ]


# ---------------------------------------------------------------------------------------------
# The pattern.


@pytest.mark.anyio
async def test_a_catastrophic_pattern_finds_the_matching_lines_of_a_long_text() -> None:
    text = b"a" * 100_000 + b"!\naaa\n" + b"a" * 50_000 + b"b\n"
    with anyio.fail_after(60):  # a hang guard: a backtracking engine would not return
        lines = await anyio.to_thread.run_sync(LineRegex(CATASTROPHIC).lines, text, 10)
    assert lines == [1]


def test_a_match_must_lie_within_one_line() -> None:
    assert LineRegex(r"one\ntwo|x").lines(b"one\ntwo\nx\n", 10) == [2]


def test_ignore_case_folds_beyond_ascii() -> None:
    regex = LineRegex("stra\u00dfe caf\u00e9", ignore_case=True)
    assert regex.lines("STRA\u00dfE CAF\u00c9\nstrasse\n".encode(), 10) == [0]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", r"invalid escape sequence: \1"),
        ("(?=a)b", "invalid perl operator: (?="),
        ("(?<!a)b", "invalid perl operator: (?<!"),
        ("a*+", "bad repetition operator: *+"),
    ],
)
def test_a_construct_re2_lacks_is_refused_as_unsupported(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as caught:
        LineRegex(pattern)
    assert str(caught.value) == f"unsupported regular expression {pattern!r}: {reason}" + (
        UNSUPPORTED_TAIL
    )


def test_a_malformed_pattern_is_refused_as_invalid() -> None:
    with pytest.raises(PatternError) as caught:
        LineRegex("(unclosed")
    assert str(caught.value) == "invalid regular expression '(unclosed': missing ): (unclosed"


def test_a_long_text_is_searched_in_pieces_and_the_checkpoint_between_them_ends_it() -> None:
    line = b"x" * 99 + b"\n"
    text = line * (2 * PIECE_BYTES // len(line)) + b"hit\n"
    calls: list[int] = []

    def checkpoint() -> None:
        calls.append(1)
        raise Stop

    with pytest.raises(Stop):
        LineRegex("hit").lines(text, 10, checkpoint)
    assert calls == [1]
    assert LineRegex("hit").lines(line * 3 + b"hit\n", 10, checkpoint) == [3]  # one piece


# ---------------------------------------------------------------------------------------------
# grep


@pytest.mark.anyio
async def test_grep_with_a_catastrophic_pattern_answers_with_the_matching_lines(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("a" * 100_000 + "!\naaa\n")
    with anyio.fail_after(60):  # a hang guard: a backtracking engine would not return
        result = await anyio.to_thread.run_sync(grep, GrepArgs(CATASTROPHIC), tmp_path, [])
    assert result.text == "a.txt:2:aaa"


def test_grep_context_after_a_hit_on_the_last_line_ends_with_the_file(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\nhit\n")
    result = grep(GrepArgs("hit", context_lines=2), tmp_path, [])
    assert result.text == "a.txt-1-one\na.txt:2:hit"


@pytest.mark.anyio
async def test_grep_with_an_unsupported_construct_is_an_error_result(tmp_path: Path) -> None:
    outcome = await call(ToolContext("s", tmp_path, [], NoClient()), "grep", {"pattern": "(?=a)"})
    message = "unsupported regular expression '(?=a)': invalid perl operator: (?="
    assert outcome == ToolOutcome([TextContent(message + UNSUPPORTED_TAIL)], True)


def test_grep_calls_its_checkpoint_before_each_file_and_stops_at_what_it_raises(
    tmp_path: Path,
) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("hit\n")
    calls: list[int] = []

    def checkpoint() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise Stop

    with pytest.raises(Stop):
        grep(GrepArgs("hit"), tmp_path, [], checkpoint=checkpoint)
    assert calls == [1, 1]


# ---------------------------------------------------------------------------------------------
# search_history


@pytest.mark.anyio
async def test_search_history_with_a_catastrophic_pattern_finds_the_matching_lines() -> None:
    events = history("a" * 100_000 + "!\naaa", "b" * 10)
    with anyio.fail_after(60):  # a hang guard: a backtracking engine would not return
        hits, more = await anyio.to_thread.run_sync(
            search_history, events, LineRegex(CATASTROPHIC), 5
        )
    assert (hits, more) == ([Hit(0, 0, "tool result call_0", "aaa")], False)


def test_search_history_calls_its_checkpoint_between_runs_of_events() -> None:
    events = history(*["miss"] * 600)
    calls: list[int] = []
    assert search_history(events, LineRegex("hit"), 5, lambda: calls.append(1)) == ([], False)
    assert len(calls) == 600 // 256


@pytest.mark.anyio
async def test_search_history_with_an_unsupported_construct_is_an_error_result(
    tmp_path: Path,
) -> None:
    ctx = ToolContext("s", tmp_path, [], NoClient(), history=lambda: history("x"))
    outcome = await call(ctx, "search_history", {"pattern": r"(x)\1"})
    message = r"unsupported regular expression '(x)\\1': invalid escape sequence: \1"
    assert outcome == ToolOutcome([TextContent(message + UNSUPPORTED_TAIL)], True)


@pytest.mark.anyio
async def test_search_history_matches_in_a_worker_thread_not_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []

    def recorded(*args: Any) -> tuple[list[Hit], bool]:
        threads.append(threading.get_ident())
        return search_history(*args)

    monkeypatch.setattr(history_tool, "search_history", recorded)
    message = UserMessageEvent(0, 0, UserMessageData(0, UserMessage("u", [TextContent("hit")])))
    ctx = ToolContext("s", tmp_path, [], NoClient(), history=lambda: [message])
    outcome = await call(ctx, "search_history", {"pattern": "hit"})
    assert outcome.content == [TextContent("[seq 0, turn 0, user] hit")]
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


def test_search_history_lines_end_at_every_line_break_as_before() -> None:
    events = history("port 8123\r\nhost\u2028port 9000", "")
    hits, _ = search_history(events, LineRegex("^port|^$"), 5)
    assert [h.line for h in hits] == ["port 8123", "port 9000"]


@pytest.mark.anyio
async def test_search_history_leaves_out_the_turns_a_rewind_took_back(tmp_path: Path) -> None:
    def said(turn: int, text: str) -> UserMessageData:
        return UserMessageData(turn, UserMessage(f"user-{turn}", [TextContent(text)]))

    done = TurnEndReasonCompleted()
    kinds_and_data: list[tuple[type, object]] = [
        (TurnStart, TurnStartData(0)),
        (UserMessageEvent, said(0, "fix b one way")),
        (TurnEnd, TurnEndData(0, done)),
        (TurnStart, TurnStartData(1)),
        (UserMessageEvent, said(1, "/rewind 1")),
        (SessionRewind, SessionRewindData("user-0", [], [])),
        (CommandResult, CommandResultData(1, "rewind", [TextContent("Rewound.")])),
        (TurnEnd, TurnEndData(1, done)),
        (TurnStart, TurnStartData(2)),
        (UserMessageEvent, said(2, "fix b another way")),
        (TurnEnd, TurnEndData(2, done)),
    ]
    events = [kind(seq, seq, data) for seq, (kind, data) in enumerate(kinds_and_data)]
    ctx = ToolContext("s", tmp_path, [], NoClient(), history=lambda: events)
    outcome = await call(ctx, "search_history", {"pattern": "fix b"})
    assert outcome.content == [TextContent("[seq 9, turn 2, user] fix b another way")]
