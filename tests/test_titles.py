"""Automatic titles (SPEC 4.4), the pure part: when a session is due one, the first prompt's
line cut at a word, what is kept of a model's answer, and its call's usage in the figures."""

from __future__ import annotations

import pytest

from acp_server.core.acp_updates import Cost, UsageShown
from acp_server.core.commands import session_stats
from acp_server.core.content import ContentBlock, ImageContent, TextContent
from acp_server.core.events import (
    SessionEvent,
    SessionTitle,
    SessionTitleData,
    TurnEnd,
    TurnEndData,
    TurnEndReason,
    TurnEndReasonCancelled,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.stream import Usage
from acp_server.core.titles import (
    default_title_mode,
    model_title,
    prompt_title,
    title_due,
    title_request,
)
from acp_server.core.usage import Prices, usage_shown

COMPLETED = TurnEndReasonCompleted()


def turn(
    number: int, seq: int, content: list[ContentBlock], reason: TurnEndReason = COMPLETED
) -> list[SessionEvent]:
    message = UserMessage(f"user-{number}", content)
    return [
        TurnStart(seq, 0, TurnStartData(number)),
        UserMessageEvent(seq + 1, 0, UserMessageData(number, message)),
        TurnEnd(seq + 2, 0, TurnEndData(number, reason)),
    ]


def said(text: str) -> list[ContentBlock]:
    return [TextContent(text)]


# ---------------------------------------------------------------------------------------------
# When a session is due a title.


def test_a_first_completed_model_turn_makes_the_session_due_a_title() -> None:
    assert title_due(turn(0, 0, said("Fix the parser\nIt fails on tabs."))) == (
        "Fix the parser\nIt fails on tabs."
    )


def test_a_session_with_a_title_is_never_due_another() -> None:
    titled = [*turn(0, 0, said("/title Mine")), SessionTitle(3, 0, SessionTitleData("Mine"))]
    assert title_due([*titled, *turn(1, 4, said("Fix the parser"))]) is None


def test_a_command_turn_makes_no_session_due_a_title() -> None:
    assert title_due(turn(0, 0, said("/stats"))) is None
    assert title_due(turn(0, 0, said("/compact"))) is None


def test_a_turn_that_did_not_complete_makes_no_session_due_a_title() -> None:
    assert title_due(turn(0, 0, said("Fix it"), TurnEndReasonCancelled())) is None


def test_the_title_comes_from_the_first_model_prompt_after_a_later_turn_completes() -> None:
    log = [
        *turn(0, 0, said("/stats")),
        *turn(1, 3, said("Fix the parser"), TurnEndReasonCancelled()),
        *turn(2, 6, said("Try again")),
    ]
    assert title_due(log) == "Fix the parser"


def test_a_first_prompt_without_text_makes_no_session_due_a_title() -> None:
    assert title_due(turn(0, 0, [ImageContent("aGk=", "image/png")])) is None


def test_live_providers_title_by_model_and_llm_replay_by_prompt() -> None:
    assert (default_title_mode(True), default_title_mode(False)) == ("model", "prompt")


# ---------------------------------------------------------------------------------------------
# The prompt's title.


def test_a_short_first_line_is_the_title_with_its_whitespace_collapsed() -> None:
    assert prompt_title("\n  Fix   the\tparser \nIt fails on tabs.") == "Fix the parser"


def test_a_long_first_line_is_cut_at_a_word_with_an_ellipsis() -> None:
    text = "Please refactor the session registry so that closing waits for background titles"
    assert prompt_title(text) == "Please refactor the session registry so that closing waits…"


def test_a_word_that_ends_just_before_the_ellipsis_is_kept() -> None:
    assert prompt_title("b" * 54 + " cdef more") == "b" * 54 + " cdef…"


def test_a_line_of_exactly_the_limit_is_kept_whole() -> None:
    assert prompt_title("a" * 60) == "a" * 60


def test_a_word_longer_than_the_limit_is_cut_inside() -> None:
    assert prompt_title("x" * 80) == "x" * 59 + "…"


def test_punctuation_before_the_cut_is_dropped() -> None:
    assert prompt_title("word, " * 20, limit=20) == "word, word, word…"


def test_a_blank_prompt_has_no_title() -> None:
    assert prompt_title(" \n\t\n") is None


def test_the_title_request_shows_at_most_the_first_2000_characters() -> None:
    assert title_request("  hello  ") == "hello"
    assert title_request("y" * 2500) == "y" * 2000 + "…"


# ---------------------------------------------------------------------------------------------
# The model's title.


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ("Parser tab handling", "Parser tab handling"),
        ('"Parser tab handling."\n', "Parser tab handling"),
        ("Title: **Parser fixes**", "Parser fixes"),
        ("\n\u201cTabs in the parser\u201d\nMore words", "Tabs in the parser"),
        ("Wait for it...", "Wait for it..."),
    ],
)
def test_the_models_answer_is_kept_without_its_decoration(answer: str, title: str) -> None:
    assert model_title(answer) == title


def test_an_answer_without_words_gives_no_title() -> None:
    assert model_title(' "" \n') is None


# ---------------------------------------------------------------------------------------------
# The title's call in the figures.

TITLED: list[SessionEvent] = [
    *turn(0, 0, said("Fix the parser")),
    SessionTitle(3, 0, SessionTitleData("Parser fixes", Usage(40, 6))),
]


def test_stats_count_the_title_calls_tokens_but_not_as_a_step() -> None:
    lines = session_stats(TITLED).splitlines()
    assert lines[3:6] == ["Model calls: 0", "Tool calls: 0", "Tokens: 40 in, 6 out"]


def test_the_cost_counts_the_title_calls_usage() -> None:
    shown = usage_shown(Usage(10, 0), 1000, Prices(1_000_000.0, 1_000_000.0), TITLED)
    assert shown == UsageShown(10, 1000, Cost(46.0, "USD"))
