"""Usage figures (SPEC 4.4 `usage_update`): used, the context window and the session's cost;
and the size limit of one prompt block."""

from __future__ import annotations

import msgspec
from acp import schema
from acp_models import exact

from acp_server.core.acp_updates import Cost, UsageShown
from acp_server.core.content import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceContents,
    TextContent,
)
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    ContextCompaction,
    ContextCompactionData,
    SessionEvent,
)
from acp_server.core.prompt_limits import block_size, oversized_block
from acp_server.core.stream import Usage
from acp_server.core.usage import (
    DEFAULT_CONTEXT_WINDOW,
    Prices,
    context_window,
    nearly_full,
    usage_shown,
)


def message(seq: int, usage: Usage) -> SessionEvent:
    return AssistantMessageEvent(
        seq, 0, AssistantMessageData(0, seq, AssistantMessage(f"m{seq}", []), usage)
    )


def test_used_is_the_calls_input_plus_output_tokens() -> None:
    assert usage_shown(Usage(1200, 300), 8000, None, []) == UsageShown(1500, 8000)


def test_cost_sums_every_call_of_the_session_at_the_prices() -> None:
    log = [message(0, Usage(1_000_000, 0)), message(1, Usage(500_000, 100_000))]
    shown = usage_shown(Usage(500_000, 100_000), 128_000, Prices(2.5, 10.0), log)
    assert shown == UsageShown(600_000, 128_000, Cost(4.75, "USD"))


def test_a_configured_context_window_wins() -> None:
    assert context_window("gpt-4o", 32_000) == 32_000


def test_a_known_model_has_its_own_context_window() -> None:
    assert context_window("gpt-4.1", None) == 1_047_576


def test_an_unknown_model_gets_the_default_context_window() -> None:
    assert context_window("llm-replay", None) == DEFAULT_CONTEXT_WINDOW == 128_000


def test_the_usage_update_fits_the_acp_model() -> None:
    value = msgspec.json.decode(msgspec.json.encode(UsageShown(10, 100, Cost(0.5, "USD"))))
    exact(schema.UsageUpdate, value, "usage_update")


def test_the_first_block_over_the_limit_is_named_with_its_size() -> None:
    prompt: list[ContentBlock] = [
        TextContent("look"),
        ImageContent("A" * 11, "image/png"),
        AudioContent("B" * 12, "audio/wav"),
    ]
    assert oversized_block(prompt, limit=10) == (1, 11)


def test_an_embedded_resource_counts_its_text_in_utf8_bytes() -> None:
    block = EmbeddedResource(ResourceContents("file:///a", text="é" * 6))
    assert block_size(block) == 12


def test_blocks_within_the_limit_pass() -> None:
    assert oversized_block([TextContent("x" * 10)], limit=10) is None


def test_a_call_crossing_nine_tenths_of_the_window_is_nearly_full() -> None:
    log = [message(0, Usage(500, 10)), message(1, Usage(895, 5))]
    assert nearly_full(log, 1000) == 900


def test_a_call_staying_above_nine_tenths_is_not_news() -> None:
    log = [message(0, Usage(900, 10)), message(1, Usage(950, 5))]
    assert nearly_full(log, 1000) is None


def test_below_nine_tenths_nothing_is_nearly_full() -> None:
    assert nearly_full([message(0, Usage(880, 19))], 1000) is None


def test_a_summarising_calls_usage_does_not_count() -> None:
    summarised = ContextCompaction(2, 0, ContextCompactionData(0, 1, 0))
    log = [message(0, Usage(500, 10)), message(1, Usage(990, 5)), summarised]
    assert nearly_full([*log, message(3, Usage(920, 5))], 1000) == 925
