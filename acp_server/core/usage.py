"""Context usage and cost figures (SPEC 4.4 `usage_update`), without I/O.

`used` is the last model call's input plus output tokens; `size` the model's context window
(given, or from `KNOWN_CONTEXT_WINDOWS`); `cost` the whole session's, summed over every model
call's usage in the log (`logged_usages`: each `assistant/message`'s, and an automatic
title's call's) at the given USD prices per million tokens, so a loaded session's cost counts
what came before the load too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

import msgspec
from msgspec import UNSET

from .acp_updates import Cost, UsageShown
from .events import AssistantMessageEvent, ContextCompaction, SessionEvent, SessionTitle
from .stream import Usage

NEARLY_FULL_AT: Final = 0.9
"""The share of the context window from which a model call's usage is worth a notice."""

DEFAULT_CONTEXT_WINDOW: Final = 128_000
"""The window assumed for a model nobody gave one for (llm-replay's recordings included)."""

KNOWN_CONTEXT_WINDOWS: Final[dict[str, int]] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
}


def context_window(model: str, configured: int | None) -> int:
    """The context window of `model`: the configured one, else the table's, else the default."""
    if configured is not None:
        return configured
    return KNOWN_CONTEXT_WINDOWS.get(model, DEFAULT_CONTEXT_WINDOW)


class Prices(msgspec.Struct, frozen=True):
    """USD per million tokens."""

    input: float
    output: float

    def of(self, usage: Usage) -> float:
        return (usage.input_tokens * self.input + usage.output_tokens * self.output) / 1_000_000


def usage_shown(
    usage: Usage, size: int, prices: Prices | None, events: Iterable[SessionEvent]
) -> UsageShown:
    """The `usage_update` after a model call that reported `usage`; `events` is the log
    (its assistant messages' usages make the cost)."""
    used = usage.input_tokens + usage.output_tokens
    if prices is None:
        return UsageShown(used, size)
    total = sum(prices.of(logged) for logged in logged_usages(events))
    return UsageShown(used, size, Cost(round(total, 6), "USD"))


def logged_usages(events: Iterable[SessionEvent]) -> Iterator[Usage]:
    """The usage of every model call the log holds: each `assistant/message`'s, and that of
    the call that made an automatic title (`session/title`'s)."""
    for event in events:
        if type(event) is AssistantMessageEvent or type(event) is SessionTitle:
            usage = event.data.usage
        else:
            continue
        if usage is not UNSET:
            yield usage


def nearly_full(events: Iterable[SessionEvent], size: int) -> int | None:
    """The tokens the latest model call used, if that usage is the one that crossed into the
    top `NEARLY_FULL_AT` of a context window of `size` (the model call before it was below):
    one notice per crossing, however many calls stay above. Summarising calls do not count
    (their input is the history they replace). None otherwise."""
    threshold = size * NEARLY_FULL_AT
    summaries: set[tuple[int, int]] = set()
    usages: list[tuple[tuple[int, int], int]] = []
    for event in events:
        if type(event) is ContextCompaction:
            summaries.add((event.data.turn, event.data.step))
        elif type(event) is AssistantMessageEvent and event.data.usage is not UNSET:
            usage = event.data.usage
            usages.append(
                ((event.data.turn, event.data.step), usage.input_tokens + usage.output_tokens)
            )
    counted = [used for step, used in usages if step not in summaries]
    if not counted or counted[-1] < threshold:
        return None
    if len(counted) > 1 and counted[-2] >= threshold:
        return None
    return counted[-1]
