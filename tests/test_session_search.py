"""`session.search`'s matching in the pure core (SPEC 3.5): one hit per matching event, newest
first, with its seq, kind and a snippet; fed a batch at a time, capped, paged by seq; and its
runner over a live log, within its time bound."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import session_events

from acp_server.core.content import TextContent
from acp_server.core.event_log import EventLog
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    SessionEvent,
    ToolResult,
    ToolResultData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.history import SearchHit, SearchParams, SearchResult, SessionAddressed
from acp_server.core.history_search import SNIPPET_CHARS, SessionSearch, snippet
from acp_server.core.line_regex import LineRegex
from acp_server.core.stream import AssistantReasoning, AssistantText
from acp_server.jsonrpc.errors import InvalidParams
from acp_server.server.search import search


def numbered(*events: SessionEvent) -> list[SessionEvent]:
    return [msgspec.structs.replace(e, seq=k) for k, e in enumerate(events)]


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent(0, 0, UserMessageData(0, UserMessage("u", [TextContent(text)])))


def assistant(text: str, thought: str = "") -> AssistantMessageEvent:
    blocks: list[AssistantText | AssistantReasoning] = [AssistantReasoning(thought)]
    blocks.append(AssistantText(text))
    return AssistantMessageEvent(0, 0, AssistantMessageData(0, 0, AssistantMessage("a", blocks)))


def result(text: str) -> ToolResult:
    return ToolResult(0, 0, ToolResultData(0, 0, "call_1", [TextContent(text)]))


LOG = numbered(
    user("Where is the Config?"),
    assistant("It is in config.toml", thought="the config lives at the root"),
    result("[server]\nport = 8123"),
    assistant("Port 8123 it is.", thought="nothing about config here"),
    user("thanks"),
)


def searched(pattern: str, limit: int = 10, *, batch: int = 100) -> SessionSearch:
    search = SessionSearch(LineRegex(pattern, ignore_case=True), limit)
    end = len(LOG)
    while end > 0 and not search.done:
        search.feed(LOG[max(0, end - batch) : end])
        end -= batch
    return search


def test_hits_come_newest_first_one_per_event_with_seq_kind_and_line() -> None:
    search = searched("config")
    assert (search.hits, search.has_more) == (
        [
            SearchHit(3, "agent_thought", "nothing about config here"),
            SearchHit(1, "agent_message", "It is in config.toml"),
            SearchHit(0, "user_message", "Where is the Config?"),
        ],
        False,
    )


def test_a_tool_result_hit_quotes_its_matching_line() -> None:
    assert searched("8123").hits == [
        SearchHit(3, "agent_message", "Port 8123 it is."),
        SearchHit(2, "tool_result", "port = 8123"),
    ]


def test_the_limit_keeps_the_newest_and_says_an_older_one_matched() -> None:
    search = searched("config", limit=2)
    assert [h.seq for h in search.hits] == [3, 1]
    assert search.has_more is True
    assert search.done is True


def test_a_limit_met_by_the_last_match_says_nothing_more_matched() -> None:
    search = searched("config", limit=3)
    assert [h.seq for h in search.hits] == [3, 1, 0]
    assert search.has_more is False


def test_batches_of_any_size_find_the_same_hits() -> None:
    whole = searched("config|8123|thanks")
    for batch in range(1, len(LOG) + 1):
        assert searched("config|8123|thanks", batch=batch).hits == whole.hits


def test_a_long_line_is_cut_around_its_match() -> None:
    line = "x" * 300 + "needle" + "y" * 300
    cut = snippet(line, (300, 306))
    assert cut == "…" + "x" * 40 + "needle" + "y" * (SNIPPET_CHARS - 46) + "…"


def test_a_match_near_an_end_keeps_the_snippet_full_length() -> None:
    line = "needle" + "y" * 300
    assert snippet(line, (0, 6)) == line[:SNIPPET_CHARS] + "…"
    line = "x" * 300 + "needle"
    assert snippet(line, (300, 306)) == "…" + line[-SNIPPET_CHARS:]


def test_a_short_line_is_quoted_whole() -> None:
    assert snippet("a needle", (2, 8)) == "a needle"


@given(session_events(), st.integers(min_value=1, max_value=5), st.integers(1, 40))
def test_paging_by_the_last_hits_seq_walks_every_hit_once(
    events: list[SessionEvent], limit: int, batch: int
) -> None:
    pattern = LineRegex("[aeiou]")
    everything = SessionSearch(pattern, len(events) + 1)
    everything.feed(events)
    walked: list[SearchHit] = []
    first = events[0].seq if events else 0  # the log's seqs start anywhere
    before = len(events)  # an index into `events`: the seq `first + before`
    while True:
        page = SessionSearch(pattern, limit)
        end = before
        while end > 0 and not page.done:
            page.feed(events[max(0, end - batch) : end])
            end -= batch
        walked += page.hits
        if not page.has_more:
            break
        before = page.hits[-1].seq - first
    assert walked == everything.hits
    assert [h.seq for h in walked] == sorted({h.seq for h in walked}, reverse=True)


def live_log() -> EventLog:
    log = EventLog()
    for event in LOG:
        log.append(event)
    return log


def request(query: str, **params: Any) -> SearchParams:
    return SearchParams(SessionAddressed("s"), query, **params)


@pytest.mark.anyio
async def test_a_live_log_is_searched_before_the_seq_asked() -> None:
    result = await search("s", live_log(), request("config", before_seq=3))
    assert result == SearchResult(
        [
            SearchHit(1, "agent_message", "It is in config.toml"),
            SearchHit(0, "user_message", "Where is the Config?"),
        ],
        False,
    )


@pytest.mark.anyio
async def test_a_search_past_its_time_bound_is_invalid_params_naming_query() -> None:
    with pytest.raises(InvalidParams) as refused:
        await search("s", live_log(), request("config"), seconds=0)
    assert refused.value.data == {"path": "$.query"}
    assert "could not finish within 0 s" in refused.value.message
