"""msgspec types for the ACP v1 messages the server handles (schema release 1.21.0).

Inbound params (`*Request`, `*Notification`) accept unknown fields: clients speak newer
versions of the protocol and add fields we must not choke on. They are converted with
`msgspec.convert`, so a wrong field gives a `ValidationError` whose message names it
(`... - at `$.cwd``), which the error table turns into -32602. Results (`*Response`) are only
ever encoded; their optional fields default to `UNSET` and are left out of the JSON.

ACP's `_meta` is kept as `meta` (wire name `_meta`) wherever the schema has it.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import UNSET, Meta, UnsetType, field

from ..core.content import ContentBlock, Meta_
from ..core.modes import ConfigOption, SessionModeState
from ..core.structs import MAX_SAFE_INTEGER, Model

log = logging.getLogger(__name__)

T = TypeVar("T")

ProtocolVersion = Annotated[int, Meta(ge=0, le=65535)]


class Inbound(Model, forbid_unknown_fields=False):
    """Base of every inbound params struct: camelCase, unknown fields ignored."""


class Empty(Model):
    """An object with nothing but an optional `_meta` (capability markers, empty results)."""

    meta: Meta_ = field(default=UNSET, name="_meta")


# ---------------------------------------------------------------------------------------------
# initialize / authenticate.


class Implementation(Inbound):
    name: str
    version: str
    title: str | UnsetType | None = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class FileSystemCapabilities(Inbound):
    read_text_file: bool = False
    write_text_file: bool = False
    meta: Meta_ = field(default=UNSET, name="_meta")


class ClientAuthCapabilities(Inbound):
    terminal: bool = False
    meta: Meta_ = field(default=UNSET, name="_meta")


class ClientSessionCapabilities(Inbound):
    """`clientCapabilities.session`: the session updates of the newer schema the client takes.
    Each is advertised by an object; absent, null or anything else is not advertised (the
    schema makes each "default on error")."""

    compaction: Any = None
    notices: Any = None


class ElicitationCapabilities(Inbound):
    # Any value: the schema reads a malformed one as absent, which `form_elicitation` does.
    form: Any = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ClientCapabilities(Inbound):
    """What the client can do for us; only the parts the server uses are typed."""

    fs: FileSystemCapabilities = msgspec.field(default_factory=FileSystemCapabilities)
    terminal: bool = False
    auth: ClientAuthCapabilities = msgspec.field(default_factory=ClientAuthCapabilities)
    elicitation: Any = UNSET
    """`ElicitationCapabilities` where the client gave one; read by `form_elicitation`."""
    meta: Meta_ = field(default=UNSET, name="_meta")
    session: Any = None
    """`ClientSessionCapabilities`, converted on its own: the schema makes it "default on
    error", so a malformed one is taken as absent, not as a malformed `clientCapabilities`."""
    # The unstable schema's markers: a non-null object advertises support. Kept untyped, so
    # that a malformed one (default on error) costs only itself (see `marker_advertised`).
    plan: Any = UNSET
    subagents: Any = UNSET


def lenient(value: Any, kind: type[T], default: T) -> T:
    """`value` as `kind`, or `default` when it is absent, null or malformed: the schema marks
    the client's capabilities and info "default on error" (a client sending a malformed
    capability object still gets a session, with the capability taken as absent)."""
    if value is UNSET or value is None:
        return default
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        log.warning("ignored a malformed %s from the client: %s", kind.__name__, exc)
        return default


def marker_advertised(marker: Any) -> bool:
    """Whether a capability marker (`{}` or an object with `_meta`) was advertised."""
    return isinstance(marker, dict)


def form_elicitation(capabilities: ClientCapabilities) -> bool:
    """Whether the client advertised form elicitation (`elicitation.form` an object): absent,
    null or malformed values mean it did not."""
    value = capabilities.elicitation
    if not isinstance(value, dict):
        return False
    try:
        elicitation = msgspec.convert(value, ElicitationCapabilities)
    except msgspec.ValidationError:
        return False
    return isinstance(elicitation.form, dict)


class InitializeRequest(Inbound):
    protocol_version: ProtocolVersion
    # The schema marks both "default on error": a malformed value falls back to the default
    # (see `agent.py`) instead of failing the handshake, so they are converted separately.
    client_capabilities: Any = UNSET
    client_info: Any = UNSET
    # ACP v2's names for the two above (read by `v2.agent` when the version is 2 or later).
    info: Any = UNSET
    capabilities: Any = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class PromptCapabilities(Model):
    image: bool
    audio: bool
    embedded_context: bool


class SystemPromptModes(Model):
    """The `systemPrompt` modes beyond `append` that the agent takes."""

    override: Empty | UnsetType = UNSET


class SystemPromptCapabilities(Model):
    mode: SystemPromptModes | UnsetType = UNSET


class SessionCapabilities(Model):
    list: Empty | UnsetType = UNSET
    resume: Empty | UnsetType = UNSET
    close: Empty | UnsetType = UNSET
    delete: Empty | UnsetType = UNSET
    additional_directories: Empty | UnsetType = UNSET
    system_prompt: SystemPromptCapabilities | UnsetType = UNSET
    fork: Empty | UnsetType = UNSET
    title: Empty | UnsetType = UNSET
    status: Empty | UnsetType = UNSET
    archive: Empty | UnsetType = UNSET


class McpCapabilities(Model):
    """The MCP transports beyond stdio (which every agent supports) that sessions connect."""

    http: bool
    sse: bool


class AgentAuthCapabilities(Model):
    logout: Empty | UnsetType = UNSET


class AgentCapabilities(Model):
    load_session: bool
    prompt_capabilities: PromptCapabilities
    session_capabilities: SessionCapabilities
    mcp_capabilities: McpCapabilities | UnsetType = UNSET
    auth: AgentAuthCapabilities | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class AgentAuthMethod(Model):
    """An `agent` auth method: the client calls `authenticate` with its id."""

    id: str
    name: str
    description: str | UnsetType = UNSET


class TerminalAuthMethod(Model, tag="terminal", tag_field="type"):
    """A `terminal` auth method: the client runs the agent again, with `env` added."""

    id: str
    name: str
    description: str | UnsetType = UNSET
    env: dict[str, str] | UnsetType = UNSET


class AgentInfo(Model):
    name: str
    version: str
    title: str | UnsetType = UNSET


class InitializeResponse(Model):
    protocol_version: int
    agent_capabilities: AgentCapabilities
    auth_methods: list[Any]
    """`AgentAuthMethod`s and `TerminalAuthMethod`s."""
    agent_info: AgentInfo
    meta: Meta_ = field(default=UNSET, name="_meta")


class AuthenticateRequest(Inbound):
    method_id: str
    meta: Meta_ = field(default=UNSET, name="_meta")


class LogoutRequest(Inbound):
    meta: Meta_ = field(default=UNSET, name="_meta")


# ---------------------------------------------------------------------------------------------
# Session lifecycle.


class SystemPrompt(Inbound):
    """The client's `systemPrompt` (unstable ACP): `mode` is checked by the handler, so that an
    unknown one is refused with a message that names the modes taken."""

    mode: str
    content: list[ContentBlock]
    meta: Meta_ = field(default=UNSET, name="_meta")


class NewSessionRequest(Inbound):
    cwd: str
    # Required by the schema, but every value is only recorded, so an absent list is taken as
    # empty rather than refused.
    mcp_servers: list[dict[str, Any]] | UnsetType = UNSET
    additional_directories: list[str] | UnsetType = UNSET
    system_prompt: SystemPrompt | UnsetType | None = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class NewSessionResponse(Model):
    session_id: str
    modes: SessionModeState | UnsetType = UNSET
    config_options: list[ConfigOption] | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ResumeSessionResponse(Model):
    modes: SessionModeState | UnsetType = UNSET
    config_options: list[ConfigOption] | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class SetSessionModeRequest(Inbound):
    session_id: str
    mode_id: str
    meta: Meta_ = field(default=UNSET, name="_meta")


class SetSessionConfigOptionRequest(Inbound):
    session_id: str
    config_id: str
    value: str | bool
    type: str | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class SetSessionConfigOptionResponse(Model):
    config_options: list[ConfigOption]
    meta: Meta_ = field(default=UNSET, name="_meta")


class ExistingSessionRequest(Inbound):
    """What `session/load`, `session/resume` and `session/fork` take alike: a stored session
    and the working directory, MCP servers and system prompt it is opened with."""

    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] | UnsetType = UNSET
    additional_directories: list[str] | UnsetType = UNSET
    system_prompt: SystemPrompt | UnsetType | None = UNSET


class ResumeSessionRequest(ExistingSessionRequest):
    meta: Meta_ = field(default=UNSET, name="_meta")


class SessionIdRequest(Inbound):
    """`session/close`, `session/delete` and the `session/cancel` notification."""

    session_id: str
    meta: Meta_ = field(default=UNSET, name="_meta")


CloseSessionRequest = SessionIdRequest
DeleteSessionRequest = SessionIdRequest
CancelNotification = SessionIdRequest
SessionStatusRequest = SessionIdRequest
ArchiveSessionRequest = SessionIdRequest
UnarchiveSessionRequest = SessionIdRequest


class SetSessionTitleRequest(Inbound):
    """`session/set_title` (unstable): any stored session, live or not."""

    session_id: str
    title: str
    meta: Meta_ = field(default=UNSET, name="_meta")


class SetSessionTitleResponse(Model):
    title: str
    """The title as stored (trimmed)."""
    meta: Meta_ = field(default=UNSET, name="_meta")


class SessionStatusResponse(Model):
    """`session/status` (unstable): `open` (live in this process) or `saved`, and in
    `_meta["acp-server"]` whether a turn runs (`{running, turn?}`)."""

    status: str
    meta: Meta_ = field(default=UNSET, name="_meta")


class ListSessionsRequest(Inbound):
    cwd: str | UnsetType | None = UNSET
    cursor: str | UnsetType | None = UNSET
    archived: str | UnsetType | None = UNSET
    """The unstable archive filter: `exclude` (absent or null), `include` or `only`."""
    meta: Meta_ = field(default=UNSET, name="_meta")


class SessionInfo(Model):
    session_id: str
    cwd: str
    title: str | UnsetType = UNSET
    updated_at: str | UnsetType = UNSET
    additional_directories: list[str] | UnsetType = UNSET
    archived: bool | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ListSessionsResponse(Model):
    sessions: list[SessionInfo]
    next_cursor: str | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


# ---------------------------------------------------------------------------------------------
# Prompt turns and loading.


class PromptRequest(Inbound):
    session_id: str
    prompt: list[ContentBlock]
    meta: Meta_ = field(default=UNSET, name="_meta")


class PromptResponse(Model):
    stop_reason: str
    meta: Meta_ = field(default=UNSET, name="_meta")


class ReplayOptions(Inbound):
    max_messages: Annotated[int, Meta(ge=1)] | UnsetType = UNSET


class AcpServerLoadMeta(Inbound):
    replay: ReplayOptions | UnsetType = UNSET


class LoadMeta(Inbound):
    """The `_meta` of `session/load` as far as this server reads it (SPEC 4.2)."""

    acp_server: AcpServerLoadMeta | UnsetType = field(default=UNSET, name="acp-server")


class LoadSessionRequest(ExistingSessionRequest):
    meta: Any = field(default=UNSET, name="_meta")


class ReplayedMeta(Model):
    replayed_from_seq: int
    has_more: bool


class LoadSessionResponse(Model):
    modes: SessionModeState | UnsetType = UNSET
    config_options: list[ConfigOption] | UnsetType = UNSET
    meta: dict[str, ReplayedMeta] | UnsetType = field(default=UNSET, name="_meta")


# ---------------------------------------------------------------------------------------------
# Forking (ACP's unstable `session/fork`; SPEC 4.7).


class ForkSessionRequest(ExistingSessionRequest):
    meta: Any = field(default=UNSET, name="_meta")


class ForkAt(Inbound):
    """Where a fork is cut: through the event `seq`, or through the message `messageId`."""

    seq: Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)] | UnsetType = UNSET
    message_id: str | UnsetType = UNSET


class AcpServerForkMeta(Inbound):
    fork_at: ForkAt | UnsetType = UNSET


class ForkMeta(Inbound):
    """The `_meta` of `session/fork` as far as this server reads it (SPEC 4.7)."""

    acp_server: AcpServerForkMeta | UnsetType = field(default=UNSET, name="acp-server")


class ForkedMeta(Model):
    """`_meta["acp-server"]` of the answer: the last seq of the parent the fork holds."""

    through_seq: int


class ForkSessionResponse(Model):
    session_id: str
    modes: SessionModeState | UnsetType = UNSET
    config_options: list[ConfigOption] | UnsetType = UNSET
    meta: dict[str, ForkedMeta] | UnsetType = field(default=UNSET, name="_meta")
