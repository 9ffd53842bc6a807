"""Automatic titles of live sessions (SPEC 4.4): the I/O around `core.titles`.

After a model turn completes, `Titles.after_turn` gives a session that is due a title one: the
first prompt's first line at once (`prompt`), or (`model`) a short call to the session's
provider and model, made in the background so that the turn's answer is not delayed, bounded
by `TITLE_TIMEOUT`, the prompt's line kept instead when it fails, times out or is cut short by
the session's closing. The title is a `session/title` event (with the call's usage, which
`/stats` and the cost count) and a `session_info_update`. It is never written among a running
turn's events: a title that arrives while a turn runs waits for that turn's end. It never
replaces a title the log has meanwhile (`/title`, `session/set_title`).

The title's call is no step of any turn: llm-replay counts model calls by their steps (SPEC 5),
and on llm-replay titles are the prompt's, so no call is ever made there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import anyio
from msgspec import UNSET

from ..core.acp_updates import SessionInfoUpdate
from ..core.content import TextContent
from ..core.events import SessionTitle, SessionTitleData
from ..core.lifecycle import current_title
from ..core.messages import UserTurn
from ..core.stream import TextDelta, Usage, UsageChunk
from ..core.titles import (
    TITLE_MAX_TOKENS,
    TITLE_SYSTEM,
    TitleMode,
    default_title_mode,
    model_title,
    prompt_title,
    title_due,
    title_request,
)
from ..storage.errors import LogError
from .live import LiveSession

if TYPE_CHECKING:
    from ..providers.base import Provider
    from .config import ServeConfig
    from .surface import Surface

log = logging.getLogger(__name__)

TITLE_TIMEOUT: Final = 20.0
"""Seconds the title's model call may take before the prompt's line is kept instead."""

Spawn = Callable[..., None]
"""Starts a coroutine function (with its arguments) in the background of the connection."""


class Titles:
    def __init__(
        self,
        mode: TitleMode,
        provider: Provider,
        surface: Surface,
        spawn: Spawn | None,
        *,
        timeout: float = TITLE_TIMEOUT,
    ) -> None:
        self.mode: TitleMode = mode if spawn is not None or mode != "model" else "prompt"
        """`model` needs somewhere to run in the background; without it, `prompt`."""
        self.provider = provider
        self.surface = surface
        self.spawn = spawn
        self.timeout = timeout

    async def after_turn(self, session: LiveSession) -> None:
        """After a model turn of `session`, still claimed by it (no other turn can start):
        write a title that waited for the turn's end, else give the session a title if it is
        due one now. A title that arrives during a write (which awaits) is written too."""
        await self._write_pending(session)
        if self.mode != "off" and session.titling is None:
            first = title_due(session.log.plain_events())
            if first is not None and session.log.base and session.rest is not None:
                await session.rest()  # loaded for a tail: its first prompt may be before it
                first = title_due(session.log.plain_events())
            fallback = prompt_title(first) if first is not None else None
            if first is not None and fallback is not None:
                if self.mode == "prompt":
                    await self._write(session, SessionTitleData(fallback))
                else:
                    scope = session.titling = anyio.CancelScope()
                    assert self.spawn is not None
                    self.spawn(self._by_model, session, scope, first, fallback)
        await self._write_pending(session)

    async def _write_pending(self, session: LiveSession) -> None:
        while (pending := session.pending_title) is not None:
            session.pending_title = None
            await self._write(session, pending)

    async def _by_model(
        self, session: LiveSession, scope: anyio.CancelScope, first: str, fallback: str
    ) -> None:
        """The title's model call, in the background; the fallback when it gives no title."""
        data = SessionTitleData(fallback)
        made: SessionTitleData | None = None
        with session.activity():  # the session's closing waits for the title (cancelled first)
            try:
                with scope, anyio.fail_after(self.timeout):
                    made = await self._call(session, first)
                if made is not None:
                    data = made
            except TimeoutError:
                log.info("session %s: the title's model call timed out", session.id)
            except Exception as exc:  # a provider's failure of any kind: the fallback title
                log.info("session %s: the title's model call failed: %s", session.id, exc)
            finally:
                session.titling = None
            with anyio.CancelScope(shield=True):
                if session.turn is not None:
                    session.pending_title = data  # written when the running turn ends
                    return
                await self._write(session, data)

    async def _call(self, session: LiveSession, first: str) -> SessionTitleData | None:
        """Ask the session's provider and model for a title; None when the answer has none
        (its usage is lost with it: there is no event to keep it)."""
        from ..providers.base import ModelRequest  # loaded with the provider already

        request = ModelRequest(
            session_id=session.id,
            messages=[UserTurn([TextContent(title_request(first))])],
            tools=[],
            system=TITLE_SYSTEM,
            max_tokens=TITLE_MAX_TOKENS,
            model=self.surface.settings(session).model,
        )
        texts: list[str] = []
        usage: Usage | None = None
        async for chunk in self.provider.stream(request):
            if type(chunk) is TextDelta:
                texts.append(chunk.text)
            elif type(chunk) is UsageChunk:
                usage = chunk.usage
        title = model_title("".join(texts))
        if title is None:
            log.info("session %s: the model's answer held no title", session.id)
            return None
        return SessionTitleData(title, usage if usage is not None else UNSET)

    async def _write(self, session: LiveSession, data: SessionTitleData) -> None:
        """Append the title and show it, unless the log has a title by now."""
        if current_title(session.log.plain_events()) is not None:
            return
        try:
            with session.activity():
                session.recorder.append(SessionTitle, data)
                await session.recorder.sync()
        except (LogError, OSError) as exc:
            log.info("session %s: title not written: %s", session.id, exc)
            return
        await self.surface.show_everyone(session, SessionInfoUpdate(data.title))


def title_mode(config: ServeConfig | None) -> TitleMode:
    """The `--titles` the server runs with: the flag's, else its provider's default (none for
    a server without a configuration: tests that build one by hand)."""
    if config is None:
        return "off"
    if config.titles is not None:
        return config.titles
    from ..providers.registry import live_provider

    return default_title_mode(live_provider(config.provider) is not None)
