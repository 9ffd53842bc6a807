"""The ACP agent side: the method handlers of one connection (SPEC 4).

Each handler takes the raw params value, converts it to its `protocol` type with msgspec (a
wrong field is a -32602 naming it), checks with `params` what the schema cannot say (absolute
paths, session id syntax, the `acp-server` extensions in `_meta`), and calls the
`SessionRegistry` for the session lifecycle. `session/prompt` and `session/load` run through
`Conversations` (the agent loop over the model provider), `session/cancel` cancels a session's
running turn, and `History` serves the history methods (SPEC 3). A session going live here has
its MCP servers connected in the background by `mcp_connect`; the agent loop and its tools
reach the client through `port`'s `ConnectionPort`; what every session is offered is
`surface`'s. The connection is attached to every session it creates, resumes, loads or prompts
(`attached`); on a server of many connections a prompt's turn runs in the registry's services
and goes on when the connection goes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import anyio
import msgspec
from msgspec import UNSET

from ..agent.limits import DEFAULT_MAX_STEPS
from ..core.acp_updates import (
    AgentMessageChunk,
    NoticeShown,
    SessionInfoUpdate,
    SessionNotification,
)
from ..core.content import TextContent
from ..core.events import SessionArchived, SessionNotice, SessionNoticeData, SessionTitle
from ..core.lifecycle import TitleError, archive_change, normalized_title, title_change
from ..core.prompt_limits import MAX_BLOCK_BYTES, oversized_block
from ..startup import handshake
from ..startup.handshake import PROTOCOL_VERSION
from ..storage.errors import LogWriteFailed
from .attached import CLIENT_GONE, DEFAULT_DETACHED_PERMISSION_TIMEOUT, Attached
from .auth import Auth, NoAuth
from .config import ServeConfig
from .errors import AuthRequired, ConnectionClosed, InvalidParams, echoed
from .history import History
from .listing import archive_filter
from .live import LiveSession, Place
from .mcp_connect import McpReport, connect_mcp, unavailable
from .params import (
    check_absolute,
    check_directories,
    check_mcp_servers,
    check_session_id,
    fork_at,
    replay_limit,
)
from .port import ConnectionPort
from .protocol import (
    AgentAuthMethod,
    AgentCapabilities,
    AgentInfo,
    ArchiveSessionRequest,
    AuthenticateRequest,
    CancelNotification,
    ClientCapabilities,
    ClientSessionCapabilities,
    CloseSessionRequest,
    DeleteSessionRequest,
    Empty,
    ExistingSessionRequest,
    ForkedMeta,
    ForkSessionRequest,
    ForkSessionResponse,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    LogoutRequest,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ReplayedMeta,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SessionStatusRequest,
    SessionStatusResponse,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    SetSessionModeRequest,
    SetSessionTitleRequest,
    SetSessionTitleResponse,
    TerminalAuthMethod,
    UnarchiveSessionRequest,
    lenient,
)
from .rpc import Connection, Then
from .session_list import SessionList
from .sessions import SessionRegistry
from .surface import Surface, surface_config
from .system_prompt import check_system_prompt, server_prompt
from .titles import Titles, title_mode
from .turns import Conversations, busy_error
from .v2 import protocol as v2
from .v2.agent import V2Methods
from .v2.resume import ResumeSessionRequest as V2ResumeRequest

if TYPE_CHECKING:
    from ..agent.turn_env import StopReason
    from ..providers.base import Provider

log = logging.getLogger(__name__)


class Reopened(NamedTuple):
    """A session resumed or loaded on this connection (`AcpAgent.reopen`)."""

    session: LiveSession
    link: Attached
    """This connection's attachment to it."""
    notice: SessionNoticeData | None
    """The notice of its system prompt's context, to report after the answer."""
    mcp: McpReport


AGENT_CAPABILITIES: Final = msgspec.convert(handshake.AGENT_CAPABILITIES, AgentCapabilities)
AGENT_INFO: Final = msgspec.convert(handshake.AGENT_INFO, AgentInfo)
AGENT_AUTH: Final = msgspec.convert(handshake.AGENT_AUTH, AgentAuthMethod)
TERMINAL_AUTH: Final = msgspec.convert(handshake.TERMINAL_AUTH, TerminalAuthMethod)
"""The `initialize` answer's parts, whose values `handshake` keeps (it answers before this
module is imported)."""


class AcpAgent:
    """The handlers of one connection, and what the client told us about itself."""

    def __init__(
        self,
        connection: Connection,
        sessions: SessionRegistry,
        provider: Provider,
        config: ServeConfig | None = None,
        auth: Auth | None = None,
        *,
        turns_outlive: bool = True,
    ) -> None:
        self.connection = connection
        self.turns_outlive = turns_outlive
        """Whether a turn goes on when this client has gone (a server of many connections);
        the stdio server's turns end with its one client."""
        self._waiting: set[anyio.CancelScope] = set()
        """The waits of this client's prompts for turns that outlive it."""
        self.auth: Auth = auth if auth is not None else NoAuth()
        """Whether the provider has its key (SPEC 4.4)."""
        self.sessions = sessions
        self.config = config
        self.client_capabilities = ClientCapabilities()
        """Remembered from `initialize`: which `fs/*` and `terminal/*` methods we may call."""
        self.client_session_capabilities = ClientSessionCapabilities()
        """`clientCapabilities.session`: which newer session updates we may send."""
        self.client_info: Implementation | None = None
        self.client_protocol_version: int | None = None
        self.port = ConnectionPort(self)
        """What the agent loop and tools use to reach the client."""
        self.surface = Surface(surface_config(config), self.port)
        """Modes, config options, commands and usage (SPEC 4.4)."""
        self.conversations = Conversations(
            sessions,
            provider,
            self.port,
            max_steps=config.max_steps if config is not None else DEFAULT_MAX_STEPS,
            surface=self.surface,
            prompt_base=server_prompt(config),
            titles=Titles(title_mode(config), provider, self.surface, self._session_work),
            permission_timeout=(
                config.detached_permission_timeout
                if config is not None
                else DEFAULT_DETACHED_PERMISSION_TIMEOUT
            ),
        )

    def install(self) -> None:
        """Route every ACP method this agent serves on its connection."""
        route = self.connection.route
        route("initialize", self.initialize, InitializeRequest)
        # What ACP v1 alone has, or has in shapes of its own; v2's are `V2Methods`'.
        for method, handler, params_type in (
            ("authenticate", self.authenticate, AuthenticateRequest),
            ("logout", self.logout, LogoutRequest),
            ("session/new", self.new_session, NewSessionRequest),
            ("session/resume", self.resume_session, ResumeSessionRequest),
            ("session/list", self.list_sessions, ListSessionsRequest),
            ("session/prompt", self.prompt, PromptRequest),
            ("session/load", self.load_session, LoadSessionRequest),
            ("session/set_mode", self.set_mode, SetSessionModeRequest),
            ("session/set_config_option", self.set_config_option, SetSessionConfigOptionRequest),
        ):
            route(method, handler, params_type, version=1)
        route("session/close", self.close_session, CloseSessionRequest)
        route("session/delete", self.delete_session, DeleteSessionRequest)
        route("session/fork", self.fork_session, ForkSessionRequest)
        route("session/set_title", self.set_title, SetSessionTitleRequest)
        route("session/status", self.status, SessionStatusRequest)
        route("session/archive", self.archive, ArchiveSessionRequest)
        route("session/unarchive", self.unarchive, UnarchiveSessionRequest)
        self.connection.route_notification("session/cancel", self.cancel, CancelNotification)
        V2Methods(self).install()
        History(self.connection, self.sessions).install()
        SessionList(self.connection, self.sessions).install()
        if not self.turns_outlive:
            # At end of input, its running turns are cancelled so they end (and log) promptly.
            self.connection.on_close(lambda: self.sessions.cancel_owned(self.port))
        self.connection.on_close(self._gone)

    def _gone(self) -> None:
        """The client has gone: its prompts stop waiting for turns that go on without it."""
        for waiting in self._waiting:
            waiting.cancel()

    def _session_work(
        self, task: Callable[..., Coroutine[Any, Any, None]], session: LiveSession, *args: Any
    ) -> None:
        """Start background work of `session` (its title's model call). Where turns outlive
        their client it belongs to the session, not to this connection: it runs in the
        registry's services, and the session, once no client holds it and nothing runs, is
        closed after it. Else it runs on this connection, as the turn did."""
        services = self.sessions.services
        if services is None or not self.turns_outlive:
            self.connection.start_soon(task, session, *args)
            return

        async def run() -> None:
            try:
                await task(session, *args)
            except CLIENT_GONE:
                pass  # what it would have shown a client that went, the log keeps
            finally:
                with anyio.CancelScope(shield=True):
                    await self.sessions.release_if_unused(session)

        services.start_soon(run)

    def _attach(self, session: LiveSession) -> Attached:
        """Attach this client to `session` (it drives it and is sent its updates)."""
        link = session.clients.get(self.port)
        if link is None:
            link = Attached(self.port, self.connection.start_soon)
            session.attach(self.port, link)
        return link

    def initialize(self, request: InitializeRequest) -> InitializeResponse | v2.InitializeResponse:
        """The version the client asked for when we speak it, else the latest we speak below
        it (v1 for 0), else our latest (SPEC 4: `initialize` never fails on a version)."""
        self.client_protocol_version = request.protocol_version
        if request.protocol_version >= 2:
            self.connection.speak(2)
            return V2Methods(self).initialize(request)
        self.connection.speak(1)
        self.client_capabilities = lenient(
            request.client_capabilities, ClientCapabilities, ClientCapabilities()
        )
        self.client_session_capabilities = lenient(
            self.client_capabilities.session,
            ClientSessionCapabilities,
            ClientSessionCapabilities(),
        )
        self.client_info = lenient(request.client_info, Implementation, None)
        if request.protocol_version != PROTOCOL_VERSION:
            log.info(
                "client asked for protocol version %d; answering %d",
                request.protocol_version,
                PROTOCOL_VERSION,
            )
        # Methods only for a provider that needs a key; the terminal one only for a client that
        # can run it (SPEC 4.4).
        methods: list[Any] = []
        if self.auth.requires_key():
            methods.append(AGENT_AUTH)
            if self.client_capabilities.auth.terminal:
                methods.append(TERMINAL_AUTH)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AGENT_CAPABILITIES,
            auth_methods=methods,
            agent_info=AGENT_INFO,
        )

    def answered_early(self, params: Any) -> None:
        """The early handshake answered `initialize` with these params (plain JSON values):
        only what the client told us stays."""
        self.initialize(msgspec.convert(params, InitializeRequest))

    def authenticate(self, request: AuthenticateRequest) -> Empty:
        if request.method_id != AGENT_AUTH.id:
            raise InvalidParams.at(
                "$.methodId",
                f"{echoed(request.method_id)} is not a method for authenticate; it is "
                f"{AGENT_AUTH.id!r} (the terminal method runs `acp-server login` instead)",
            )
        if not self.auth.authenticate():
            raise auth_required(self.auth.login_command())
        return Empty()

    def logout(self, request: LogoutRequest) -> Empty:
        self.auth.logout()
        return Empty()

    async def new_session(self, request: NewSessionRequest) -> Then:
        check_absolute(request.cwd, "$.cwd")
        self.check_auth()
        check_directories(request.additional_directories)
        servers = check_mcp_servers(request.mcp_servers)
        system_prompt = check_system_prompt(request.system_prompt)
        session = await self.sessions.create(
            request.cwd,
            additional_directories=request.additional_directories,
            mcp_servers=servers,
        )
        self._attach(session)
        notice = await self.conversations.update_context(session, system_prompt)
        return await self._opened(
            session,
            notice,
            lambda surface: NewSessionResponse(
                session_id=session.id,
                modes=surface.modes(session),
                config_options=surface.options(session),
            ),
        )

    async def _opened(
        self,
        session: LiveSession,
        notice: SessionNoticeData | None,
        answer: Callable[[Surface], Any],
    ) -> Then:
        """A new session (made or forked) goes live on this connection: bound, its MCP servers
        connecting, answered with `answer(surface)`; its commands, any MCP failures (once
        its servers settled) and the `notice` of its system prompt's context go out once the
        client knows its id."""
        self.conversations.bind(session)
        mcp = await connect_mcp(self.sessions, session, self.config)
        surface = self.surface
        response = answer(surface)
        report = await self.reporter(session, mcp, notice)

        def then() -> None:
            if self.connection.protocol_version < 2:  # v2 has the commands in the answer
                self.connection.start_soon(_announce, surface, session, False)
            report()

        return Then(response, then)

    async def fork_session(self, request: ForkSessionRequest) -> Then:
        """`session/fork` (SPEC 4.7): a new session, live on this connection as a new one is,
        whose log starts with the parent's events through the fork point
        (`_meta["acp-server"].forkAt`, by default the parent's last completed turn). Its
        `systemPrompt`, when it differs from the one the copied prefix holds, is logged after
        `session/forked`; without one the fork keeps the prefix's."""
        check_session_id(request.session_id)
        check_absolute(request.cwd, "$.cwd")
        self.check_auth()
        check_directories(request.additional_directories)
        servers = check_mcp_servers(request.mcp_servers)
        system_prompt = check_system_prompt(request.system_prompt)
        at = fork_at(request.meta)
        session, through = await self.sessions.fork(
            request.session_id,
            request.cwd,
            additional_directories=request.additional_directories,
            mcp_servers=servers,
            seq=at.seq if isinstance(at.seq, int) else None,
            message_id=at.message_id if isinstance(at.message_id, str) else None,
        )
        self._attach(session)
        notice = await self.conversations.update_context(session, system_prompt)
        return await self._opened(
            session,
            notice,
            lambda surface: ForkSessionResponse(
                session_id=session.id,
                modes=surface.modes(session),
                config_options=surface.options(session),
                meta={"acp-server": ForkedMeta(through)},
            ),
        )

    async def set_mode(self, request: SetSessionModeRequest) -> Empty:
        session = self._settable(request.session_id)
        await self.surface.set_mode(session, request.mode_id)
        return Empty()

    async def set_config_option(
        self, request: SetSessionConfigOptionRequest
    ) -> SetSessionConfigOptionResponse:
        session = self._settable(request.session_id)
        await self.surface.set_option(session, request.config_id, request.value)
        return SetSessionConfigOptionResponse(self.surface.options(session))

    def _settable(self, session_id: str) -> LiveSession:
        session = self.sessions.get(check_session_id(session_id))
        if session.turn is not None:
            # Its events would land among the running step's chunks, which stay consecutive.
            raise busy_error(session_id)
        return session

    async def resume_session(self, request: ResumeSessionRequest) -> Then:
        reopened = await self.reopen(request)
        session = reopened.session
        self.surface.restore(session)
        await self.surface.announce(session, restored=True)
        response = ResumeSessionResponse(
            modes=self.surface.modes(session), config_options=self.surface.options(session)
        )
        return Then(response, await self.reporter(session, reopened.mcp, reopened.notice))

    async def reopen(
        self,
        request: ExistingSessionRequest | V2ResumeRequest,
        *,
        tail: int | None = None,
        hold: bool = False,
    ) -> Reopened:
        """What `session/resume` (v1 and v2) and `session/load` do alike: the session (opened
        here with `tail` as `SessionRegistry.resume` takes it, or the one live here) attached
        to this connection, its system prompt updated, bound, its MCP servers connecting.
        With `hold` this client's updates of it wait (`Attached.hold`) from the moment it is
        attached: the caller replays and releases them."""
        check_session_id(request.session_id)
        check_absolute(request.cwd, "$.cwd")
        directories = request.additional_directories
        check_directories(directories if directories is not None else UNSET)
        system_prompt = check_system_prompt(request.system_prompt)
        running = self.sessions.live.get(request.session_id)
        if system_prompt is not None and running is not None and running.turn is not None:
            # Its event would land among the running step's chunks, which stay consecutive.
            raise busy_error(request.session_id)
        servers = request.mcp_servers
        session = await self.sessions.resume(
            request.session_id,
            request.cwd,
            additional_directories=directories if directories is not None else [],
            mcp_servers=check_mcp_servers(servers if servers is not None else []),
            tail=tail,
        )
        link = self._attach(session)
        if hold:
            link.hold()  # its live updates wait for the replay
        try:
            notice = await self.conversations.update_context(session, system_prompt)
            self.conversations.bind(session)
            mcp = await connect_mcp(self.sessions, session, self.config)
        except BaseException:
            if hold:
                link.release()
            raise
        return Reopened(session, link, notice, mcp)

    async def reporter(
        self, session: LiveSession, mcp: McpReport, notice: SessionNoticeData | None = None
    ) -> Callable[[], None]:
        """What tells the user, after the answer, the `notice` of the session's system prompt
        (its instruction files cut), whether the session's log is read-only and, once its MCP
        servers have settled, which of them are missing (each once: their notices are in the
        log by then, written when they settled).

        The context's notice goes into the log now, before the answer, when no turn of the
        session can be running yet (its events may not land among a step's chunks); a
        read-only log cannot take its own notice, which is only shown."""
        notices = [notice] if notice is not None else []
        failure = session.writer.failure
        if failure is None and notices:
            for logged in notices:
                session.recorder.append(SessionNotice, logged)
            try:
                with session.activity():
                    await session.recorder.sync()
            except LogWriteFailed as exc:  # the next prompt reopens the log and says why
                log.info("session %s: its notices were not written: %s", session.id, exc)
        elif failure is not None:
            notices.append(
                SessionNoticeData(
                    "warning",
                    "Session is read-only",
                    f"Its log cannot be written ({failure.strerror or failure}): the "
                    "conversation can be replayed and paged, and the next prompt tries to "
                    "write it again.",
                )
            )

        def report() -> None:
            if notices:
                self.connection.start_soon(self._report, session.id, notices, [])
            if mcp.servers is not None or mcp.failures:
                self.connection.start_soon(self._report_mcp, session, mcp)

        return report

    async def _report_mcp(self, session: LiveSession, mcp: McpReport) -> None:
        """Once the servers have settled: the failures, made durable, then shown."""
        failures = await mcp.settled()
        if not failures:
            return
        writer = session.writer
        if not writer.closed and writer.failure is None:
            try:
                with session.activity():
                    await session.recorder.sync()
            except LogWriteFailed as exc:  # the next prompt reopens the log and says why
                log.info("session %s: its notices were not written: %s", session.id, exc)
        notices = [unavailable(name, why) for name, why in failures]
        await self._report(session.id, notices, failures)

    async def _report(
        self,
        session_id: str,
        notices: list[SessionNoticeData],
        failures: list[tuple[str, str]],
    ) -> None:
        if self.port.capabilities.notices:
            await self.port.notify_all(
                "session/update",
                [
                    SessionNotification(session_id, NoticeShown(n.severity, n.title, n.description))
                    for n in notices
                ],
            )
            return
        if not failures:
            return  # a client without notices is told of missing MCP servers only, as before
        lines = [f"MCP server {name!r} is not available: {why}" for name, why in failures]
        # A paragraph of its own: it may come just before a turn's first words.
        update = AgentMessageChunk(TextContent("\n".join(lines) + "\n\n"))
        await self.port.notify("session/update", SessionNotification(session_id, update))

    def check_auth(self) -> None:
        """-32000 when the provider needs its key and has none (SPEC 4.4)."""
        if self.auth.needed():
            raise auth_required(self.auth.login_command())

    @staticmethod
    def check_prompt(prompt: list[Any]) -> None:
        """-32602 naming the first block of `prompt` over the size limit, if one is."""
        too_big = oversized_block(prompt)
        if too_big is not None:
            index, size = too_big
            raise InvalidParams.at(
                f"$.prompt[{index}]",
                f"the {prompt[index].__struct_config__.tag} block is {size} bytes; "
                f"a prompt block may hold at most {MAX_BLOCK_BYTES} bytes (20 MiB)",
            )

    def attach(self, session: LiveSession) -> Attached:
        """Attach this client to `session` (it drives it and is sent its updates)."""
        return self._attach(session)

    async def prompt(self, request: PromptRequest) -> PromptResponse:
        self.check_prompt(request.prompt)
        session = self.sessions.get(check_session_id(request.session_id))
        self._attach(session)  # a session live here may be driven from any connection
        place = self.conversations.admit(session)  # before any wait: a cancel after finds it
        return PromptResponse(stop_reason=await self._outliving(session, request.prompt, place))

    async def _outliving(self, session: LiveSession, prompt: list[Any], place: Place) -> StopReason:
        """The prompt's turn, run in the registry's services so that it goes on when this
        client goes (`turns_outlive`); this request waits for its outcome, and its
        `$/cancel_request` cancels it."""
        services = self.sessions.services
        if services is None or not self.turns_outlive:
            return await self.conversations.prompt(session, prompt, place)
        outcome: list[StopReason] = []
        failure: list[Exception] = []
        done = anyio.Event()
        scope = anyio.CancelScope()

        async def run() -> None:
            try:
                with scope:
                    outcome.append(await self.conversations.prompt(session, prompt, place))
            except Exception as exc:
                failure.append(exc)
            finally:
                done.set()  # also when the process's shutdown cancelled it

        try:
            services.start_soon(run)
        except BaseException:  # the services have ended: the process is shutting down
            self.conversations.leave(session, place)
            raise
        with anyio.CancelScope() as waiting:
            self._waiting.add(waiting)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                if not self.connection.closed:  # `$/cancel_request`, not the client going
                    scope.cancel()
                raise
            finally:
                self._waiting.discard(waiting)
        if waiting.cancelled_caught:
            raise ConnectionClosed("session/prompt: the client has gone; its turn goes on")
        if failure:
            raise failure[0]
        return outcome[0] if outcome else "cancelled"

    async def load_session(self, request: LoadSessionRequest) -> Then:
        """`session/load`: open the log (with recovery), replay it, then answer `{}`.

        With `_meta["acp-server"].replay.maxMessages` only the newest messages are replayed
        (SPEC 4.2), and the answer's `_meta["acp-server"]` says where the replay started.
        """
        max_messages = replay_limit(request.meta)
        reopened = await self.reopen(
            request,
            # Its cost is every model call's: with prices, the whole log is read.
            tail=max_messages if self.surface.config.prices is None else None,
            hold=True,
        )
        session, link, notice, mcp = reopened
        cut = await self.conversations.replay(session, max_messages, link)
        surface = self.surface
        surface.restore(session)
        await surface.announce(session, restored=True)
        response = LoadSessionResponse(
            modes=surface.modes(session), config_options=surface.options(session)
        )
        if max_messages is not None:
            response.meta = {"acp-server": ReplayedMeta(cut.start, cut.has_more)}
        return Then(response, await self.reporter(session, mcp, notice))

    async def list_sessions(self, request: ListSessionsRequest) -> ListSessionsResponse:
        cwd = request.cwd if isinstance(request.cwd, str) else None
        if cwd is not None:
            check_absolute(cwd, "$.cwd")
        cursor = request.cursor if isinstance(request.cursor, str) else None
        archived = archive_filter(request.archived if isinstance(request.archived, str) else None)
        return await self.sessions.list(cwd, cursor, archived)

    async def set_title(self, request: SetSessionTitleRequest) -> SetSessionTitleResponse:
        """`session/set_title`: a `session/title` event in any stored session, live here or not;
        answered once it is stored. Every client attached to the session is shown it."""
        session_id = check_session_id(request.session_id)
        try:
            title = normalized_title(request.title)
        except TitleError as exc:
            raise InvalidParams.at("$.title", str(exc)) from None
        event = await self.sessions.amend(
            session_id, SessionTitle, lambda events: title_change(events, title)
        )
        session = self.sessions.live.get(session_id)
        if event is not None and session is not None:
            if self.port in session.clients:
                await self.surface.show_everyone(session, SessionInfoUpdate(title))
            else:
                session.show_all(SessionInfoUpdate(title))
        return SetSessionTitleResponse(title)

    async def status(self, request: SessionStatusRequest) -> SessionStatusResponse:
        """`session/status`: `open` while the session is live in this process (for any
        connection), else `saved`; `_meta["acp-server"]` says whether a turn runs, and which.
        Nothing is opened, changed or attached."""
        session = await self.sessions.status(check_session_id(request.session_id))
        turn = session.turn if session is not None else None
        ours: dict[str, Any] = {"running": turn is not None}
        if turn is not None:
            ours["turn"] = turn.number
        return SessionStatusResponse(
            "open" if session is not None else "saved", {"acp-server": ours}
        )

    async def archive(self, request: ArchiveSessionRequest) -> Empty:
        """`session/archive`: closed first if it is open here (its work cancelled, as
        `session/close` does), then a `session/archived {archived: true}` event."""
        session_id = check_session_id(request.session_id)
        await self.sessions.amend(
            session_id,
            SessionArchived,
            lambda events: archive_change(events, True),
            close_live=True,
        )
        return Empty()

    async def unarchive(self, request: UnarchiveSessionRequest) -> Empty:
        """`session/unarchive`: a `session/archived {archived: false}` event; the session is
        not loaded or resumed."""
        session_id = check_session_id(request.session_id)
        await self.sessions.amend(
            session_id, SessionArchived, lambda events: archive_change(events, False)
        )
        return Empty()

    async def close_session(self, request: CloseSessionRequest) -> Empty:
        await self.sessions.close(check_session_id(request.session_id), self.port)
        return Empty()

    async def delete_session(self, request: DeleteSessionRequest) -> Empty:
        await self.sessions.delete(check_session_id(request.session_id))
        return Empty()

    def cancel(self, request: CancelNotification) -> None:
        if not self.sessions.cancel(check_session_id(request.session_id), self.port):
            log.info("session/cancel for %s: no such live session", request.session_id)


def auth_required(login: str) -> AuthRequired:
    return AuthRequired(
        "Authentication required: the model provider has no API key; set it in the "
        f"provider's environment variable or run `{login}`, then authenticate",
        {"authMethods": [AGENT_AUTH.id]},
    )


async def _announce(surface: Surface, session: LiveSession, restored: bool) -> None:
    """`Surface.announce` in a task of its own, after a response: no one waits for it, so
    an output that closed meanwhile is only logged."""
    try:
        await surface.announce(session, restored=restored)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        log.debug("session %s: output closed before its commands could be sent", session.id)
