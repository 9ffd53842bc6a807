"""`search_history` (SPEC 4.3): the session's own earlier messages and tool results, searched.

The work is `core.history_search`; this is its registration's runner, reading the session's
events through `ToolContext.history` and searching them in a worker thread, cancellable there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Final

import anyio.from_thread
import anyio.to_thread
from msgspec import UNSET, Meta, UnsetType

from ...core.content import TextContent
from ...core.events import SessionEvent
from ...core.history_search import Hit, render_hits, search_history
from ...core.line_regex import LineRegex, PatternError
from ...core.rewind import live_events
from .arguments import Arguments
from .base import ToolCallInfo, ToolContext, ToolError, ToolOutcome
from .registry import OnStarted

DEFAULT_MAX_RESULTS: Final = 20
MAX_RESULTS: Final = 200


class SearchHistoryArgs(Arguments):
    pattern: Annotated[
        str,
        Meta(
            min_length=1,
            description="A regular expression (RE2 syntax: Python's without backreferences or "
            "lookaround), matched per line.",
        ),
    ]
    max_results: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_RESULTS,
                description=f"The most matching lines to return (default {DEFAULT_MAX_RESULTS}).",
            ),
        ]
        | UnsetType
    ) = UNSET


async def run_search_history(
    ctx: ToolContext, call: ToolCallInfo, args: SearchHistoryArgs, on_started: OnStarted
) -> ToolOutcome:
    try:
        pattern = LineRegex(args.pattern)
    except PatternError as exc:
        raise ToolError(str(exc)) from None
    if ctx.history is None:
        raise ToolError("this session has no history to search")
    await on_started()
    if ctx.whole is not None:
        await ctx.whole()
    limit = DEFAULT_MAX_RESULTS if args.max_results is UNSET else args.max_results
    # The events are taken here, on the event loop that appends to the log; matching them is
    # the thread's, which stops at its next checkpoint when the call is cancelled.
    events = list(ctx.history())
    hits, more = await anyio.to_thread.run_sync(
        _search_live, events, pattern, limit, anyio.from_thread.check_cancelled
    )
    raw = {"matches": len(hits), "truncated": more}
    return ToolOutcome([TextContent(render_hits(hits, more))], False, raw)


def _search_live(
    events: list[SessionEvent], pattern: LineRegex, limit: int, checkpoint: Callable[[], None]
) -> tuple[list[Hit], bool]:
    """`search_history` over the turns the model still has: a rewound turn's messages and
    results are left out, as they are of the model's history (`session/rewind`)."""
    return search_history(live_events(events), pattern, limit, checkpoint)
