"""Modes, config options, slash commands and usage of live sessions (SPEC 4.4), over the log.

`Surface` is the thin I/O layer over `core.modes`, `core.commands` and `core.usage`: it keeps a
live session's settings (folded from its log when it goes live), appends a `session/mode` or
`session/config` event for every change and tells the client, and runs a command's turn: its
`turn/start`, `user/message`, the events it causes, its `command/result` and `turn/end`.
`surface_config` is what every session is offered, from the command line.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from msgspec import UNSET, Struct
from msgspec.structs import replace

from ..agent.ports import ClientPort
from ..core.acp_updates import (
    AgentMessageChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    SessionInfoUpdate,
    SessionNotification,
    SessionUpdate,
    UsageShown,
    command_message_id,
    user_message_id,
)
from ..core.commands import COMMANDS, CommandCall, help_text, session_stats
from ..core.compaction import DEFAULT_COMPACT_AT, compact_limit
from ..core.content import ContentBlock, TextContent
from ..core.events import (
    CommandResult,
    CommandResultData,
    SessionConfig,
    SessionConfigData,
    SessionMode,
    SessionModeData,
    SessionTitle,
    SessionTitleData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from ..core.mcp_status import mcp_text
from ..core.modes import (
    MODE_IDS,
    REASONING_LEVELS,
    Choices,
    ConfigOption,
    SessionModeState,
    SettingError,
    Settings,
    check_setting,
    config_options,
    default_settings,
    fold_settings,
    mode_state,
)
from ..core.stream import Usage
from ..core.usage import Prices, context_window, usage_shown
from ..providers.names import REPLAY
from .errors import InvalidParams
from .live import LiveSession
from .mcp_connect import mcp_statuses

if TYPE_CHECKING:
    from .config import ServeConfig

log = logging.getLogger(__name__)

REPLAY_MODEL: Final = "llm-replay"
"""The one model llm-replay offers: the recording it replays."""
REPLAY_CHOICES: Final = Choices((REPLAY_MODEL,))


class SurfaceConfig(Struct, frozen=True):
    """What the server offers every session: the default mode, the models to choose from (the
    first is the default), reasoning levels (none when the provider takes none), and what the
    usage figures need."""

    mode: str = "default"
    choices: Choices = REPLAY_CHOICES
    context_window: int | None = None
    prices: Prices | None = None
    reasoning: str | None = None
    """The default reasoning effort, one of `choices.reasoning`."""
    compact_at: float = DEFAULT_COMPACT_AT
    """The share of the context window at which a session compacts before a model call."""


def surface_config(config: ServeConfig | None) -> SurfaceConfig:
    """What every session is offered, from the command line (SPEC 4.4, 8)."""
    if config is None:
        return SurfaceConfig()
    prices = None
    if config.price_input is not None or config.price_output is not None:
        prices = Prices(config.price_input or 0.0, config.price_output or 0.0)
    if config.provider != REPLAY and config.model:  # a live provider: its models
        models = (config.model, *(m for m in config.models if m != config.model))
        reasoning = REASONING_LEVELS if config.reasoning is not None else ()
        choices = Choices(models, reasoning)
    else:
        choices = Choices((REPLAY_MODEL,))
    return SurfaceConfig(
        config.mode,
        choices,
        config.context_window,
        prices,
        config.reasoning,
        compact_at=config.compact_at,
    )


class Surface:
    def __init__(self, config: SurfaceConfig, client: ClientPort) -> None:
        self.config = config
        self.client = client
        defaults = default_settings(config.mode, config.choices)
        if config.reasoning is not None and config.reasoning in config.choices.reasoning:
            defaults = replace(defaults, reasoning=config.reasoning)
        self.defaults = defaults

    # -- settings -----------------------------------------------------------------------------

    def settings(self, session: LiveSession) -> Settings:
        """The session's settings; folded from its log the first time they are asked for."""
        if session.settings is None:
            session.settings = fold_settings(
                session.log.plain_events(), self.defaults, self.config.choices
            )
        return session.settings

    def restore(self, session: LiveSession) -> None:
        """Fold the settings again (the session's events were re-read: a load, a resume)."""
        session.settings = None
        self.settings(session)

    def modes(self, session: LiveSession) -> SessionModeState:
        return mode_state(self.settings(session).mode)

    def options(self, session: LiveSession) -> list[ConfigOption]:
        return config_options(self.settings(session), self.config.choices)

    def mode_of(self, session: LiveSession) -> str:
        return self.settings(session).mode

    async def set_mode(self, session: LiveSession, mode_id: str) -> None:
        """`session/set_mode`: a `session/mode` event, then the option list in step with it."""
        if mode_id not in MODE_IDS:
            raise InvalidParams.at(
                "$.modeId", f"unknown mode {mode_id!r}; the modes are: {', '.join(MODE_IDS)}"
            )
        self._change(session, "mode", mode_id)
        await self._sync(session)
        session.show_all(CurrentModeUpdate(mode_id), self.client)
        await self.show_everyone(session, ConfigOptionUpdate(self.options(session)))

    async def set_option(self, session: LiveSession, config_id: str, value: object) -> None:
        """`session/set_config_option` (the caller answers the complete list)."""
        try:
            checked = check_setting(config_id, value, self.config.choices)
        except SettingError as exc:
            raise InvalidParams.at(f"$.{exc.field}", str(exc)) from None
        self._change(session, config_id, checked)
        await self._sync(session)
        session.show_all(ConfigOptionUpdate(self.options(session)), self.client)
        if config_id == "mode":
            await self.show_everyone(session, CurrentModeUpdate(checked))

    def _change(self, session: LiveSession, config_id: str, value: str) -> None:
        settings = self.settings(session)
        if settings.value(config_id) == value:
            return  # nothing changed: nothing to log
        rec = session.recorder
        if config_id == "mode":
            rec.append(SessionMode, SessionModeData(value))
            session.settings = replace(settings, mode=value)
        else:
            rec.append(SessionConfig, SessionConfigData(config_id, value))
            session.settings = replace(settings, **{config_id: value})

    async def _sync(self, session: LiveSession) -> None:
        with session.activity():
            await session.recorder.sync()

    # -- what a session shows when it goes live -----------------------------------------------

    async def announce(self, session: LiveSession, *, restored: bool) -> None:
        """The commands, and for a loaded or resumed session its mode and options."""
        if restored:
            await self.show(session, CurrentModeUpdate(self.mode_of(session)))
            await self.show(session, ConfigOptionUpdate(self.options(session)))
        await self.show(session, AvailableCommandsUpdate(list(COMMANDS)))

    async def show(self, session: LiveSession, update: SessionUpdate) -> None:
        await self.client.notify("session/update", SessionNotification(session.id, update))

    async def show_everyone(self, session: LiveSession, update: SessionUpdate) -> None:
        """`update` to this client, and to every other client attached to the session."""
        session.show_all(update, self.client)
        await self.show(session, update)

    # -- commands -----------------------------------------------------------------------------

    async def run_command(
        self,
        session: LiveSession,
        call: CommandCall,
        prompt: list[ContentBlock],
        answer: Callable[[int], Awaitable[tuple[str, bool]]] | None = None,
        message_id: str | None = None,
    ) -> None:
        """A command's turn, in the log and on the wire; it never calls the model. `answer`
        runs a command that needs more than the session (`/rewind`: the store, the client)
        in the turn given, appending its events: its answer and whether it failed."""
        rec = session.recorder
        turn = rec.log.turns
        shown: list[SessionUpdate] = []
        with session.activity():
            rec.append(TurnStart, TurnStartData(turn))
            rec.append(
                UserMessageEvent,
                UserMessageData(turn, UserMessage(message_id or user_message_id(turn), prompt)),
            )
            if answer is not None:
                text, failed = await answer(turn)
            else:
                text, failed = self._command(session, call, shown)
            content: list[ContentBlock] = [TextContent(text)]
            rec.append(
                CommandResult,
                CommandResultData(turn, call.name, content, True if failed else UNSET),
            )
            rec.append(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
            await rec.sync()
        for update in shown:
            await self.show_everyone(session, update)
        await self.show_everyone(session, AgentMessageChunk(content[0], command_message_id(turn)))

    def _command(
        self, session: LiveSession, call: CommandCall, shown: list[SessionUpdate]
    ) -> tuple[str, bool]:
        """Run `call`'s effects (appending their events); its answer and whether it failed."""
        if call.name == "title":
            if not call.argument:
                return "Usage: /title <text>", True
            session.recorder.append(SessionTitle, SessionTitleData(call.argument))
            shown.append(SessionInfoUpdate(call.argument))
            return f"Title set to: {call.argument}", False
        if call.name == "stats":
            return session_stats(session.log.records), False
        if call.name == "help":
            return help_text(COMMANDS), False
        if call.name == "mcp":
            return mcp_text(mcp_statuses(session)), False
        if call.name in ("mode", "model"):
            try:
                value = check_setting(call.name, call.argument, self.config.choices)
            except SettingError as exc:
                return str(exc), True
            self._change(session, call.name, value)
            if call.name == "mode":
                shown.append(CurrentModeUpdate(value))
            shown.append(ConfigOptionUpdate(self.options(session)))
            return f"{call.name.capitalize()} set to {value}", False
        return f"unknown command /{call.name}", True  # not reached: only listed ones parse

    # -- usage --------------------------------------------------------------------------------

    def compact_limit(self, session: LiveSession) -> int | None:
        """The tokens at which the session compacts before its next model call (SPEC 4.6)."""
        size = context_window(self.settings(session).model, self.config.context_window)
        return compact_limit(size, self.config.compact_at)

    def usage_update(self, session: LiveSession, usage: Usage) -> UsageShown:
        size = context_window(self.settings(session).model, self.config.context_window)
        return usage_shown(usage, size, self.config.prices, session.log.plain_events())
