"""Session modes and config options (SPEC 4.4): the policy and the state, without I/O.

A mode decides what a tool that changes something may do: ask the user, go ahead, or be
refused. `permission_decision` is that table; the tools' permission code asks it before it
asks the client. A session's settings (its mode, model and reasoning effort) are the latest
`session/mode` and `session/config` events of its log over the server's defaults
(`fold_settings`), and `config_options` presents them as ACP `SessionConfigOption`s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal

from msgspec import UNSET, Struct, UnsetType
from msgspec.structs import replace

from .events import SessionConfig, SessionEvent, SessionMode

Decision = Literal["ask", "allow", "refuse"]

DEFAULT_MODE: Final = "default"


class ModeInfo(Struct, frozen=True):
    id: str
    name: str
    description: str


MODES: Final[tuple[ModeInfo, ...]] = (
    ModeInfo("default", "Default", "Asks before writes, edits and commands"),
    ModeInfo(
        "accept-edits",
        "Accept edits",
        "Writes and edits inside the session's directories go ahead; commands ask",
    ),
    ModeInfo("plan", "Plan", "Reads and plans only: writes, edits and commands are refused"),
    ModeInfo("full-access", "Full access", "Every tool goes ahead without asking"),
)
MODE_IDS: Final[tuple[str, ...]] = tuple(mode.id for mode in MODES)

EDIT_KINDS: Final = frozenset({"edit"})
"""The ACP tool kinds `accept-edits` lets through: writes and edits of files."""


def permission_decision(mode: str, kind: str) -> Decision:
    """What a tool of ACP kind `kind` that would ask permission does in `mode`.

    Only tools that change something ask at all (writes, edits, commands, MCP tools); this
    says whether they still ask. Paths outside the session's directories are refused before
    this is consulted, so `accept-edits` lets through only edits inside them.
    """
    if mode == "full-access":
        return "allow"
    if mode == "plan":
        return "refuse"
    if mode == "accept-edits" and kind in EDIT_KINDS:
        return "allow"
    return "ask"


def plan_mode_refusal(tool: str) -> str:
    """What the model reads when plan mode refuses `tool`."""
    return (
        f"{tool} was not run: the session is in plan mode, in which writes, edits and commands "
        "are refused. Describe the change instead; the user can switch modes to make it."
    )


# ---------------------------------------------------------------------------------------------
# Settings.

REASONING_LEVELS: Final[tuple[str, ...]] = ("low", "medium", "high")


class Choices(Struct, frozen=True):
    """What a session may choose between: the provider's models, and its reasoning levels
    (empty when the provider takes no reasoning effort)."""

    models: tuple[str, ...]
    reasoning: tuple[str, ...] = ()


class Settings(Struct, frozen=True):
    mode: str
    model: str
    reasoning: str | None = None

    def value(self, config_id: str) -> str | None:
        if config_id == "mode":
            return self.mode
        if config_id == "model":
            return self.model
        if config_id == "reasoning":
            return self.reasoning
        return None


def default_settings(mode: str, choices: Choices) -> Settings:
    """A new session's settings: the server's mode, the first model, medium effort."""
    reasoning = None
    if choices.reasoning:
        reasoning = "medium" if "medium" in choices.reasoning else choices.reasoning[0]
    return Settings(mode, choices.models[0], reasoning)


def apply_event(settings: Settings, event: SessionEvent) -> Settings:
    """`settings` after one event (unchanged by any event that is not a setting)."""
    if type(event) is SessionMode:
        return replace(settings, mode=event.data.mode_id)
    if type(event) is SessionConfig:
        value = event.data.value
        if not isinstance(value, str):
            return settings
        config_id = event.data.config_id
        if config_id == "mode":
            return replace(settings, mode=value)
        if config_id == "model":
            return replace(settings, model=value)
        if config_id == "reasoning":
            return replace(settings, reasoning=value)
    return settings


def fold_settings(events: Iterable[SessionEvent], defaults: Settings, choices: Choices) -> Settings:
    """The latest settings a log holds over `defaults`.

    A value this server cannot offer any more (a model dropped from `--models`, a mode a
    newer build wrote) falls back to the default rather than being offered as current.
    """
    settings = defaults
    for event in events:
        settings = apply_event(settings, event)
    return Settings(
        settings.mode if settings.mode in MODE_IDS else defaults.mode,
        settings.model if settings.model in choices.models else defaults.model,
        settings.reasoning
        if settings.reasoning is not None and settings.reasoning in choices.reasoning
        else defaults.reasoning,
    )


class SettingError(ValueError):
    """A config id or value the session does not offer; the message says which."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_setting(config_id: str, value: object, choices: Choices) -> str:
    """`value` as the new value of `config_id`, or `SettingError` naming what is wrong."""
    allowed = _allowed(config_id, choices)
    if allowed is None:
        offered = ", ".join(o for o in ("mode", "model", "reasoning") if _allowed(o, choices))
        raise SettingError("configId", f"unknown config option {config_id!r}; offered: {offered}")
    if not isinstance(value, str) or value not in allowed:
        raise SettingError(
            "value", f"{value!r} is not a value of {config_id!r}; one of: {', '.join(allowed)}"
        )
    return value


def _allowed(config_id: str, choices: Choices) -> Sequence[str] | None:
    if config_id == "mode":
        return MODE_IDS
    if config_id == "model":
        return choices.models
    if config_id == "reasoning" and choices.reasoning:
        return choices.reasoning
    return None


# ---------------------------------------------------------------------------------------------
# ACP shapes.


class SessionModeInfo(Struct, rename="camel", omit_defaults=True, gc=False):
    id: str
    name: str
    description: str | UnsetType = UNSET


class SessionModeState(Struct, rename="camel", gc=False):
    current_mode_id: str
    available_modes: list[SessionModeInfo]


class ConfigSelectOption(Struct, rename="camel", omit_defaults=True, gc=False):
    value: str
    name: str
    description: str | UnsetType = UNSET


class ConfigOption(Struct, tag="select", tag_field="type", rename="camel", gc=False):
    """An ACP `SessionConfigOption` of type `select`."""

    id: str
    name: str
    category: str
    current_value: str
    options: list[ConfigSelectOption]


def mode_state(mode: str) -> SessionModeState:
    return SessionModeState(mode, [SessionModeInfo(m.id, m.name, m.description) for m in MODES])


def config_options(settings: Settings, choices: Choices) -> list[ConfigOption]:
    """The complete list of a session's config options, with their current values."""
    options = [
        ConfigOption(
            "mode",
            "Mode",
            "mode",
            settings.mode,
            [ConfigSelectOption(m.id, m.name, m.description) for m in MODES],
        ),
        ConfigOption(
            "model",
            "Model",
            "model",
            settings.model,
            [ConfigSelectOption(model, model) for model in choices.models],
        ),
    ]
    if choices.reasoning and settings.reasoning is not None:
        options.append(
            ConfigOption(
                "reasoning",
                "Reasoning effort",
                "thought_level",
                settings.reasoning,
                [ConfigSelectOption(level, level.capitalize()) for level in choices.reasoning],
            )
        )
    return options
