"""msgspec types for the ACP v2 messages whose shapes differ from v1's (SDK 2.4.0's v2 schema).

Where v1 and v2 agree (a session id request, `session/list`'s `SessionInfo`, the empty
results of close, delete, archive) the v1 types of `..protocol` serve both. What is here:
`initialize` (v2's `info` and `capabilities`, object capability markers, `authMethods` with a
`methodId` and a `type`), and the session results whose `configOptions` name their option by
`configId` and which carry the session's `availableCommands`.

Inbound params accept unknown fields, as v1's do; results leave unset fields out.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, UnsetType, field

from ...core.acp_updates import AvailableCommand
from ...core.content import Meta_
from ...core.modes import ConfigOption, ConfigSelectOption
from ...core.structs import Model
from ..protocol import Empty, Inbound, SystemPromptCapabilities

# ---------------------------------------------------------------------------------------------
# initialize.


class ClientAuthCapabilities(Inbound):
    terminal: Any = None
    """`{}` (an object): the client can run `terminal` auth methods."""


class ClientCapabilities(Inbound):
    """What a v2 client can do for us: v2 has no client `fs/*` or `terminal/*` methods."""

    auth: Any = None
    elicitation: Any = None
    """`{"form": {}}` for form elicitation (read by the port as v1's is)."""
    meta: Meta_ = field(default=UNSET, name="_meta")


class PromptCapabilities(Model):
    image: Empty | UnsetType = UNSET
    audio: Empty | UnsetType = UNSET
    embedded_context: Empty | UnsetType = UNSET


class McpCapabilities(Model):
    stdio: Empty | UnsetType = UNSET
    http: Empty | UnsetType = UNSET


class SessionCapabilities(Model):
    """`{}` alone is the baseline: new, list, resume, close, prompt, cancel."""

    prompt: PromptCapabilities | UnsetType = UNSET
    mcp: McpCapabilities | UnsetType = UNSET
    delete: Empty | UnsetType = UNSET
    additional_directories: Empty | UnsetType = UNSET
    system_prompt: SystemPromptCapabilities | UnsetType = UNSET
    fork: Empty | UnsetType = UNSET
    archive: Empty | UnsetType = UNSET
    status: Empty | UnsetType = UNSET
    title: Empty | UnsetType = UNSET


class AgentCapabilities(Model):
    session: SessionCapabilities | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class EnvVariable(Model):
    name: str
    value: str


class AgentAuthMethod(Model, tag="agent", tag_field="type"):
    """The client calls `auth/login` with its `methodId`."""

    method_id: str
    name: str
    description: str | UnsetType = UNSET


class TerminalAuthMethod(Model, tag="terminal", tag_field="type"):
    """The client runs the agent again in a terminal, with `env` added."""

    method_id: str
    name: str
    description: str | UnsetType = UNSET
    args: list[str] | UnsetType = UNSET
    env: list[EnvVariable] | UnsetType = UNSET


class Implementation(Model):
    name: str
    version: str
    title: str | UnsetType = UNSET


class InitializeResponse(Model):
    protocol_version: int
    info: Implementation
    capabilities: AgentCapabilities
    auth_methods: list[AgentAuthMethod | TerminalAuthMethod] | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


# ---------------------------------------------------------------------------------------------
# Sessions.


class SessionConfigSelect(Model, tag="select", tag_field="type"):
    """A `select` `SessionConfigOption` as v2 names it (`configId`, where v1 says `id`)."""

    config_id: str
    name: str
    current_value: str
    options: list[ConfigSelectOption]
    category: str | UnsetType = UNSET


class TextCommandInput(Model, tag="text", tag_field="type"):
    """The text after the command's name is its input."""

    hint: str


class Command(Model, tag="command", tag_field="type"):
    """An `AvailableCommand` of v2 (a discriminated union: `type: "command"`)."""

    name: str
    description: str
    input: TextCommandInput | UnsetType = UNSET


def config_options(options: list[ConfigOption]) -> list[SessionConfigSelect]:
    """v1's config options in v2's shape."""
    return [
        SessionConfigSelect(
            config_id=option.id,
            name=option.name,
            current_value=option.current_value,
            options=option.options,
            category=option.category,
        )
        for option in options
    ]


def commands(available: list[AvailableCommand] | tuple[AvailableCommand, ...]) -> list[Command]:
    """v1's available commands in v2's shape (v2 tags the `{hint}` input `type: "text"`)."""
    return [
        Command(
            command.name,
            command.description,
            UNSET if command.input is UNSET else TextCommandInput(command.input.hint),
        )
        for command in available
    ]


class NewSessionResponse(Model):
    session_id: str
    config_options: list[SessionConfigSelect] | UnsetType = UNSET
    available_commands: list[Command] | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class SetSessionConfigOptionRequest(Inbound):
    """v2's params: the value's `type` ("id" or "boolean") says what `value` is."""

    session_id: str
    config_id: str
    type: str
    value: str | bool
    meta: Meta_ = field(default=UNSET, name="_meta")


class SetSessionConfigOptionResponse(Model):
    config_options: list[SessionConfigSelect]
    meta: Meta_ = field(default=UNSET, name="_meta")
