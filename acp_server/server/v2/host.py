"""What the ACP v2 methods use of their connection's `AcpAgent`, whose v1 handlers they share
where the meaning is the same (a protocol: the v2 modules never import the agent)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..auth import Auth
from ..protocol import (
    AuthenticateRequest,
    ClientCapabilities,
    ClientSessionCapabilities,
    CloseSessionRequest,
    Empty,
    ForkSessionRequest,
    Implementation,
    ListSessionsRequest,
    ListSessionsResponse,
    LogoutRequest,
    NewSessionRequest,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
)
from ..rpc import Connection, Then

if TYPE_CHECKING:
    from ..attached import Attached
    from ..live import LiveSession
    from ..port import ConnectionPort
    from ..sessions import SessionRegistry
    from ..turns import Conversations


class Agent(Protocol):
    """The connection's agent: its v1 handlers, and what the client told it in `initialize`."""

    connection: Connection
    auth: Auth
    client_capabilities: ClientCapabilities
    client_session_capabilities: ClientSessionCapabilities
    client_info: Implementation | None
    sessions: SessionRegistry
    port: ConnectionPort
    conversations: Conversations
    turns_outlive: bool

    def authenticate(self, request: AuthenticateRequest) -> Empty: ...

    def logout(self, request: LogoutRequest) -> Empty: ...

    async def list_sessions(self, request: ListSessionsRequest) -> ListSessionsResponse: ...

    async def new_session(self, request: NewSessionRequest) -> Then: ...

    async def fork_session(self, request: ForkSessionRequest) -> Then: ...

    async def set_config_option(
        self, request: SetSessionConfigOptionRequest
    ) -> SetSessionConfigOptionResponse: ...

    def check_prompt(self, prompt: list[Any]) -> None: ...

    def check_auth(self) -> None: ...

    def attach(self, session: LiveSession) -> Attached: ...

    async def close_session(self, request: CloseSessionRequest) -> Empty: ...
