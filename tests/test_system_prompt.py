"""The client's system prompt as the pure core and the handler's checks see it (SPEC 1.2
`session/context`; ACP `systemPrompt`)."""

from __future__ import annotations

import pytest
from msgspec import UNSET

from acp_server.core.content import ImageContent, TextContent
from acp_server.core.events import (
    SessionContext,
    SessionContextData,
    SessionTitle,
    SessionTitleData,
)
from acp_server.core.system_prompt import compose_system, latest_context
from acp_server.jsonrpc.errors import InvalidParams
from acp_server.server.protocol import SystemPrompt
from acp_server.server.system_prompt import check_system_prompt


def context(mode: str, *texts: str) -> SessionContextData:
    return SessionContextData([], mode, [TextContent(t) for t in texts])  # type: ignore[arg-type]


def test_append_puts_the_client_prompt_after_the_default_with_a_blank_line() -> None:
    assert compose_system("Be careful.", context("append", "Answer in French.")) == (
        "Be careful.\n\nAnswer in French."
    )


def test_append_without_a_default_is_the_client_prompt_alone() -> None:
    assert compose_system(None, context("append", "Answer in French.")) == "Answer in French."
    assert compose_system("", context("append", "Answer in French.")) == "Answer in French."


def test_override_replaces_the_default() -> None:
    assert compose_system("Be careful.", context("override", "You are a poet.")) == (
        "You are a poet."
    )


def test_the_client_prompt_text_blocks_are_joined_by_a_blank_line() -> None:
    assert compose_system(None, context("override", "One.", "Two.")) == "One.\n\nTwo."


def test_without_a_client_prompt_the_default_stays() -> None:
    assert compose_system("Be careful.", None) == "Be careful."
    assert compose_system("Be careful.", SessionContextData([])) == "Be careful."
    assert compose_system(None, None) is None


def test_the_latest_session_context_event_holds() -> None:
    first = context("append", "First.")
    last = context("override", "Last.")
    events = [
        SessionContext(0, 0, first),
        SessionTitle(1, 0, SessionTitleData("t")),
        SessionContext(2, 0, last),
    ]
    assert latest_context(events) == last
    assert latest_context(events[1:2]) is None


def test_no_system_prompt_is_none() -> None:
    assert check_system_prompt(UNSET) is None
    assert check_system_prompt(None) is None


def test_a_text_system_prompt_is_taken_as_given() -> None:
    prompt = SystemPrompt("override", [TextContent("You are a poet.")])
    assert check_system_prompt(prompt) is prompt


def test_an_unknown_mode_is_refused_naming_the_modes() -> None:
    with pytest.raises(InvalidParams) as caught:
        check_system_prompt(SystemPrompt("prepend", [TextContent("x")]))
    assert caught.value.message == (
        "Invalid params: unknown system prompt mode 'prepend'; the modes are: append, "
        "override - at `$.systemPrompt.mode`"
    )


def test_an_empty_content_is_refused() -> None:
    with pytest.raises(InvalidParams) as caught:
        check_system_prompt(SystemPrompt("append", []))
    assert caught.value.message == (
        "Invalid params: must hold at least one content block - at `$.systemPrompt.content`"
    )


def test_a_block_that_is_not_text_is_refused_naming_it() -> None:
    with pytest.raises(InvalidParams) as caught:
        check_system_prompt(SystemPrompt("append", [TextContent("x"), ImageContent("AA", "a/b")]))
    assert caught.value.message == (
        "Invalid params: a system prompt takes text blocks only, not image "
        "- at `$.systemPrompt.content[1]`"
    )
