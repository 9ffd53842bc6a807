"""The ACP v2 methods of one connection (`AcpAgent` routes them when `initialize` agrees on
version 2): v2's shapes around the handlers v1 shares where the meaning is the same.

Routed on v2 connections only: `auth/login` and `auth/logout` (v1's `authenticate` and
`logout`), `session/new` and `session/fork` (answered with v2's `configOptions` and the
session's `availableCommands`, which a v2 client is not sent again as an update),
`session/list`, `session/set_config_option` (v2's typed value). `session/close`, `delete`,
`set_title`, `status`, `archive` and `unarchive` have one shape in both versions and are routed
for both by the agent; the history methods too. The turn methods are `turns`', `session/resume`
is `resume`'s.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET

from ...core.commands import COMMANDS
from ...startup import handshake
from ..errors import InvalidParams, echoed
from ..protocol import (
    AuthenticateRequest,
    ClientCapabilities,
    ClientSessionCapabilities,
    Empty,
    ForkSessionRequest,
    Implementation,
    InitializeRequest,
    ListSessionsRequest,
    LogoutRequest,
    NewSessionRequest,
    lenient,
    marker_advertised,
)
from ..protocol import ClientAuthCapabilities as V1ClientAuthCapabilities
from ..protocol import SetSessionConfigOptionRequest as V1SetOption
from ..rpc import Then
from . import resume, turns
from .host import Agent
from .protocol import (
    AgentAuthMethod,
    AgentCapabilities,
    ClientAuthCapabilities,
    InitializeResponse,
    NewSessionResponse,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    TerminalAuthMethod,
    commands,
    config_options,
)
from .protocol import ClientCapabilities as V2ClientCapabilities
from .protocol import Implementation as AgentInfo

__all__ = ["VERSION", "Agent", "V2Methods"]

VERSION: Final = 2

AGENT_CAPABILITIES: Final = msgspec.convert(handshake.AGENT_CAPABILITIES_V2, AgentCapabilities)
AGENT_INFO: Final = msgspec.convert(handshake.AGENT_INFO, AgentInfo)
AGENT_AUTH: Final = msgspec.convert(handshake.AGENT_AUTH_V2, AgentAuthMethod)
TERMINAL_AUTH: Final = msgspec.convert(handshake.TERMINAL_AUTH_V2, TerminalAuthMethod)

_VALUE_TYPES: Final[dict[str, type]] = {"id": str, "boolean": bool}
"""`session/set_config_option`'s value types, and the Python type of each one's `value`."""


class V2Methods:
    """The v2 method table of `agent`'s connection."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def install(self) -> None:
        """Route the methods v2 has in shapes of its own (on v2 connections only)."""
        agent = self.agent
        route = agent.connection.route
        route("auth/login", self.login, AuthenticateRequest, version=VERSION)
        route("auth/logout", agent.logout, LogoutRequest, version=VERSION)
        route("session/new", self.new_session, NewSessionRequest, version=VERSION)
        route("session/fork", self.fork_session, ForkSessionRequest, version=VERSION)
        route("session/list", agent.list_sessions, ListSessionsRequest, version=VERSION)
        route(
            "session/set_config_option",
            self.set_config_option,
            SetSessionConfigOptionRequest,
            version=VERSION,
        )
        turns.install(agent)
        resume.install(agent)

    def initialize(self, request: InitializeRequest) -> InitializeResponse:
        """The v2 `initialize` answer: `info`, object capability markers, `authMethods`.

        The client's `info` and `capabilities` are kept on the agent in the terms the port
        reads: a v2 client has no `fs/*` or `terminal/*` methods; its form elicitation is
        `elicitation.form`; notices, compaction updates and plan operations are v2's own
        update kinds, which every v2 client takes."""
        agent = self.agent
        advertised = lenient(request.capabilities, V2ClientCapabilities, V2ClientCapabilities())
        auth = lenient(advertised.auth, ClientAuthCapabilities, ClientAuthCapabilities())
        terminal_auth = marker_advertised(auth.terminal)
        agent.client_capabilities = ClientCapabilities(
            auth=V1ClientAuthCapabilities(terminal=terminal_auth),
            elicitation=advertised.elicitation
            if isinstance(advertised.elicitation, dict)
            else UNSET,
            plan={},
        )
        agent.client_session_capabilities = ClientSessionCapabilities(compaction={}, notices={})
        agent.client_info = lenient(request.info, Implementation, None)
        # Methods only for a provider that needs a key; the terminal one only for a client that
        # can run it (SPEC 4.4).
        methods: list[AgentAuthMethod | TerminalAuthMethod] = []
        if agent.auth.requires_key():
            methods.append(AGENT_AUTH)
            if terminal_auth:
                methods.append(TERMINAL_AUTH)
        return InitializeResponse(
            protocol_version=VERSION,
            info=AGENT_INFO,
            capabilities=AGENT_CAPABILITIES,
            auth_methods=methods,
        )

    def login(self, request: AuthenticateRequest) -> Empty:
        """`auth/login`: v1's `authenticate`, for the one method a client may pass to it."""
        if request.method_id != AGENT_AUTH.method_id:
            raise InvalidParams.at(
                "$.methodId",
                f"{echoed(request.method_id)} is not a method for auth/login; it is "
                f"{AGENT_AUTH.method_id!r} (the terminal method runs `acp-server login` instead)",
            )
        return self.agent.authenticate(request)

    async def new_session(self, request: NewSessionRequest) -> Then:
        opened = await self.agent.new_session(request)
        return Then(self._opened(opened.result), opened.after)

    async def fork_session(self, request: ForkSessionRequest) -> Then:
        opened = await self.agent.fork_session(request)
        return Then(self._opened(opened.result), opened.after)

    @staticmethod
    def _opened(response: Any) -> NewSessionResponse:
        """v1's answer to a new or forked session (its modes left out: v2's mode is a config
        option) in v2's shape, with the session's commands."""
        options = response.config_options
        return NewSessionResponse(
            session_id=response.session_id,
            config_options=UNSET if options is UNSET else config_options(options),
            available_commands=commands(COMMANDS),
            meta=response.meta,
        )

    async def set_config_option(
        self, request: SetSessionConfigOptionRequest
    ) -> SetSessionConfigOptionResponse:
        kind = _VALUE_TYPES.get(request.type)
        if kind is None:
            raise InvalidParams.at(
                "$.type",
                f"unknown value type {request.type!r}; the types are: {', '.join(_VALUE_TYPES)}",
            )
        if type(request.value) is not kind:
            raise InvalidParams.at("$.value", f"a {request.type!r} value must be a {kind.__name__}")
        answer = await self.agent.set_config_option(
            V1SetOption(request.session_id, request.config_id, request.value, request.type)
        )
        return SetSessionConfigOptionResponse(config_options(answer.config_options))
