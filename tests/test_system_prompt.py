"""The client's system prompt as the pure core and the handler's checks see it (SPEC 1.2
`session/context`; ACP `systemPrompt`)."""

from __future__ import annotations

import pytest
from msgspec import UNSET

from acp_server.core.chunk_rows import decode_storage_record, pack_chunk_runs
from acp_server.core.content import ImageContent, TextContent
from acp_server.core.events import (
    InstructionFile,
    SessionContext,
    SessionContextData,
    SessionTitle,
    SessionTitleData,
)
from acp_server.core.fork import fork_records
from acp_server.core.system_prompt import compose_system, context_change, latest_context
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


# -- what a client's prompt adds to a log (new, load, resume, fork) ---------------------------

AGENTS_MD = InstructionFile("/w/AGENTS.md", "ab" * 32, 12)


def test_a_prompt_other_than_the_log_s_is_a_new_context_keeping_its_instruction_files() -> None:
    current = SessionContextData([AGENTS_MD], "append", [TextContent("Answer in French.")])
    assert context_change(current, "override", [TextContent("You are a poet.")]) == (
        SessionContextData([AGENTS_MD], "override", [TextContent("You are a poet.")])
    )


def test_a_prompt_on_a_log_without_context_is_a_context_with_no_instruction_files() -> None:
    assert context_change(None, "append", [TextContent("Be brief.")]) == (
        SessionContextData([], "append", [TextContent("Be brief.")])
    )


def test_the_prompt_the_log_holds_already_adds_nothing() -> None:
    current = SessionContextData([AGENTS_MD], "override", [TextContent("You are a poet.")])
    assert context_change(current, "override", [TextContent("You are a poet.")]) is None


def test_the_same_text_in_the_other_mode_is_a_new_context() -> None:
    current = context("append", "You are a poet.")
    assert context_change(current, "override", [TextContent("You are a poet.")]) == (
        context("override", "You are a poet.")
    )


def parent_with_two_contexts() -> list[SessionContext | SessionTitle]:
    return [
        SessionContext(0, 0, context("append", "First.")),
        SessionTitle(1, 0, SessionTitleData("t")),
        SessionContext(2, 0, context("override", "Later.")),
    ]


def test_a_fork_holds_the_context_of_its_copied_prefix() -> None:
    records = fork_records(pack_chunk_runs(parent_with_two_contexts()), "parent", 2, 5)
    events = [e for r in records for e in decode_storage_record(r)]
    assert latest_context(events) == context("override", "Later.")


def test_a_fork_cut_before_a_later_context_holds_the_earlier_one() -> None:
    records = fork_records(pack_chunk_runs(parent_with_two_contexts()), "parent", 1, 5)
    events = [e for r in records for e in decode_storage_record(r)]
    assert latest_context(events) == context("append", "First.")
