"""Prompt turns and loads of live sessions: the agent loop wired to the connection and store.

`Conversations` builds each turn's environment (the session's recorder, the provider, the
client port, the tools), runs `session/prompt` turns one at a time per session (a prompt that
comes while one runs waits in the session's queue, SPEC 4), creates the child sessions of
`task` calls, and answers `session/load` with the replay of SPEC 4.2, after which the client
gets the session's live updates (`attached`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..agent.failures import ModelRequestFailed
from ..agent.ports import ClientCapabilities, ClientPort
from ..core.acp_updates import (
    ErrorObject,
    NoticeShown,
    SessionNotification,
    SessionUpdate,
    StateShown,
    ToolPresentation,
    ToolPresenter,
)
from ..core.chunk_checks import KeptRecord
from ..core.commands import init_request, parse_command
from ..core.content import ContentBlock, TextContent
from ..core.events import SessionNotice, SessionNoticeData, SubagentStart
from ..core.header import SESSION_FORMAT_VERSION, SessionHeader
from ..core.projection import TailCut, project_load, tail_start
from ..core.prompt_queue import MAX_QUEUED, QueueFull
from ..core.subagent_updates import child_replay, with_children
from ..storage.errors import LogError
from .attached import CLIENT_GONE, DEFAULT_DETACHED_PERMISSION_TIMEOUT, Attached, SessionPort
from .errors import InvalidParams, SessionInUse, to_rpc_error
from .live import LiveSession, Place
from .sessions import SessionRegistry
from .surface import Surface, SurfaceConfig
from .system_prompt import forget_context, system_for, update_context
from .titles import Titles

if TYPE_CHECKING:
    from ..agent.tools import KeptFromTools, ToolRegistry
    from ..agent.turn_env import StopReason, TurnEnv
    from ..core.prompt_render import PromptBase
    from ..providers.base import Provider
    from .protocol import SystemPrompt

log = logging.getLogger(__name__)

RUNNING = StateShown("running")


def kept_from_tools() -> KeptFromTools:
    """What no tool may reach (SPEC 4.4), as it is now: the stored credentials' directory
    (`$ACP_SERVER_CONFIG_DIR` or the platform's), every provider's key variable with the
    key's descriptor, and every key stored or left in those variables, which no tool result
    shows. The server hands it to the tools: the agent never asks the providers."""
    from ..agent.tools import KeptFromTools
    from ..providers.credentials import credentials_directory, credentials_path
    from ..providers.held_keys import held_keys
    from ..providers.registry import key_variables
    from ..providers.secret import KEY_FD_ENV

    variables = key_variables()
    held = held_keys(credentials_path(), variables).secrets
    return KeptFromTools(credentials_directory(), variables | {KEY_FD_ENV}, held)


class Conversations:
    def __init__(
        self,
        sessions: SessionRegistry,
        provider: Provider,
        client: ClientPort,
        *,
        max_steps: int,
        surface: Surface | None = None,
        prompt_base: PromptBase | None = None,
        titles: Titles | None = None,
        permission_timeout: float = DEFAULT_DETACHED_PERMISSION_TIMEOUT,
    ) -> None:
        self.sessions = sessions
        self.prompt_base = prompt_base
        """The fixed text of the server's own system prompt, which the session's context is
        added to and a client's `systemPrompt` extends or replaces; None: the server sends
        none of its own."""
        self.provider = provider
        self.client = client
        self.max_steps = max_steps
        self.surface = surface if surface is not None else Surface(SurfaceConfig(), client)
        self.titles = titles if titles is not None else Titles("off", provider, self.surface, None)
        """Automatic titles after a completed model turn (`--titles`)."""
        self.permission_timeout = permission_timeout
        """Seconds a permission request waits for a client when none is attached."""

    def bind(self, session: LiveSession) -> None:
        """Tell the provider a session went live (new, resumed or loaded), if it keeps state
        per session (`acp_server.providers.base.SessionBinding`: llm-replay does)."""
        from ..providers.base import BoundSession, SessionBinding  # loaded with the provider

        if isinstance(self.provider, SessionBinding):
            self.provider.bind_session(
                BoundSession(
                    session_id=session.id,
                    parent_session_id=session.parent_id,
                    model_calls=session.log.step_starts,
                    cwd=session.cwd,
                )
            )

    # -- prompt turns --------------------------------------------------------------------------

    async def prompt(
        self,
        session: LiveSession,
        prompt: list[ContentBlock],
        place: Place,
        message_id: str | None = None,
    ) -> StopReason:
        """Run one turn for this connection's client, once its `place` (taken by `admit` as
        the prompt was received) holds the turn: while another prompt is being answered it
        waits in the session's queue (`cancelled` when `session/cancel` withdraws it).
        `message_id`: the id its user message is logged with (a v2 prompt's receipt), by
        default the turn's `user-N`.

        Every attached client that shows state (v2) is told the turn runs, then that the
        session is idle again and why: its stop reason, or `error` with the error."""
        if not await self._wait_turn(session, place):
            return "cancelled"
        try:
            ended = StateShown("idle", "cancelled")
            try:
                stop = await self._answer(session, prompt, message_id)
            except Exception as exc:
                error = to_rpc_error(exc, "session/prompt")
                ended = StateShown("idle", "error", ErrorObject(error.code, error.message))
                raise
            else:
                ended = StateShown("idle", stop)
            finally:
                with anyio.CancelScope(shield=True):
                    await self.show_state(session, ended)
            return stop
        finally:
            self._pass_turn(session)
            if not session.busy:
                with anyio.CancelScope(shield=True):  # its clients may all have gone
                    await self.sessions.release_if_unused(session)

    async def show_state(self, session: LiveSession, state: StateShown) -> None:
        """`state` of the session to every client attached to it: this client's own stream
        first-hand (in order with its turn's updates), the others through their queues."""
        session.show_all(state, self.client)
        if self.client in session.clients:
            try:
                await self.client.notify("session/update", SessionNotification(session.id, state))
            except CLIENT_GONE:
                log.debug("session %s: its prompting client has gone", session.id)

    def admit(self, session: LiveSession) -> Place:
        """This client's prompt takes its place in the session's turn order, as it is
        received (before any wait, so that a `session/cancel` read after it finds it): the
        turn at once when nothing runs or waits, else last in the queue, which every other
        attached client is told. A queue already `MAX_QUEUED` long refuses it. The place is
        then `prompt`'s to run, or `leave`'s."""
        place = Place(self.client)
        if session.prompter is None and not len(session.queue):
            session.prompter = self.client
            place.go.set()
            return place
        try:
            waiting = session.queue.admit(self.client, place)
        except QueueFull:
            raise InvalidParams.at(
                "$.sessionId",
                f"session {session.id} already has {MAX_QUEUED} prompts waiting for its "
                "running turn; wait for one to be answered",
            ) from None
        ahead = "1 prompt is" if waiting == 1 else f"{waiting} prompts are"
        queued_notice = NoticeShown(
            "info", "Prompt queued", f"It runs when the running turn ends ({ahead} waiting)."
        )
        session.show_all(queued_notice)
        return place

    def leave(self, session: LiveSession, place: Place) -> None:
        """A prompt whose turn will not run (its request cancelled, its task never started)
        gives up its `place`: out of the queue, or the turn it holds goes to the next."""
        if not session.queue.remove(place) and place.go.is_set() and not place.withdrawn:
            self._pass_turn(session)

    async def _wait_turn(self, session: LiveSession, place: Place) -> bool:
        """Wait until `place` holds the turn; False when it was withdrawn meanwhile."""
        try:
            await place.go.wait()
        except BaseException:
            self.leave(session, place)
            raise
        return not place.withdrawn

    @staticmethod
    def _pass_turn(session: LiveSession) -> None:
        """The prompt being answered is done: the oldest waiting one runs next."""
        session.prompter = None
        session.cancelled_early = False
        place = session.queue.pop_next()
        if place is not None:
            session.prompter = place.client
            place.go.set()

    async def _answer(
        self, session: LiveSession, prompt: list[ContentBlock], message_id: str | None
    ) -> StopReason:
        from ..agent.loop import Turn  # the loop and its tools, imported by the first prompt

        command = parse_command(prompt)
        compact: str | None = None
        if command is not None and command.name == "compact":
            compact = command.argument  # a command that calls the model: a turn of the loop's
        elif command is not None and command.name == "init":
            # A request to the model in the command's place: the turn is a conversation turn,
            # and the model writes AGENTS.md with the write tool, asking as the mode says.
            prompt = [TextContent(init_request(command.argument))]
        elif command is not None:
            await self.show_state(session, RUNNING)
            if session.writer.failure is not None:
                await self.sessions.reopen(session)
                self.bind(session)
            answer = None
            if command.name in ("rewind", "stats"):  # they read every turn
                await self.sessions.whole(session)
            if command.name == "rewind":
                answer = partial(self._rewind, session, command.argument)
            await self.surface.run_command(session, command, prompt, answer, message_id)
            return "end_turn"
        turn = Turn(self._env(session), prompt, compact=compact, message_id=message_id)
        session.begin(turn)
        failure: Exception | None = None
        try:
            # Once the turn can be cancelled: a cancel sent as soon as it is seen running ends it.
            await self.show_state(session, RUNNING)
            with session.activity():  # closing the session waits for all of it
                if session.writer.failure is not None:
                    # A write failed earlier (or the log is read-only): continue the log anew
                    # first, or say why it still cannot be written.
                    await self.sessions.reopen(session)
                    self.bind(session)
                    turn = Turn(self._env(session), prompt, compact=compact, message_id=message_id)
                    session.begin(turn)
                await self._refresh_context(session)
                async with anyio.create_task_group() as flushing:
                    flushing.start_soon(session.recorder.run_flusher)
                    try:
                        stop = await turn.run()
                    except Exception as exc:
                        # Raised outside the task group, or it would arrive wrapped in an
                        # ExceptionGroup and a failed model request would read as a crash.
                        failure = exc
                    finally:
                        flushing.cancel_scope.cancel()
                if failure is not None and not isinstance(failure, ModelRequestFailed):
                    await self._recover(session)  # still claimed: nothing else writes meanwhile
                else:
                    await self.titles.after_turn(session)  # the last await of the claim
        finally:
            session.turn = None
            self.sessions.changed(session.id)  # idle again: the live session list says so
        if failure is not None:
            raise failure
        return stop

    async def update_context(
        self, session: LiveSession, prompt: SystemPrompt | None = None, *, reread: bool = True
    ) -> SessionNoticeData | None:
        """Log what shapes the session's system prompt now (the client's `prompt`, and the
        server prompt's inputs read again) when it changed; the notice to log and show when
        the instruction files were cut (`system_prompt.update_context`). With `reread` (the
        session just went live: its events were read anew), its latest context is folded from
        its log again first."""
        base = self.prompt_base
        if reread:
            forget_context(session)
            if session.turn is not None:
                base = None  # resumed while its turn runs: the next turn reads them
        config_dir = None
        if base is not None:
            from ..providers.credentials import credentials_directory

            config_dir = credentials_directory()
        return await update_context(session, prompt, base, config_dir)

    async def _refresh_context(self, session: LiveSession) -> None:
        """Before a turn that calls the model: the server prompt's inputs read again, logged
        when they changed, and a notice logged and shown when the cap cut the instruction
        files."""
        notice = await self.update_context(session, reread=False)
        if notice is None:
            return
        session.recorder.append(SessionNotice, notice)
        await session.recorder.sync()
        if self.client.capabilities.notices:
            shown = NoticeShown(notice.severity, notice.title, notice.description)
            await self.client.notify("session/update", SessionNotification(session.id, shown))

    async def _rewind(self, session: LiveSession, argument: str, turn: int) -> tuple[str, bool]:
        from .rewind import run_rewind  # the file tools' modules, loaded by the first rewind

        credentials = kept_from_tools().credentials
        store = self.sessions.store
        return await run_rewind(session, store, self.client, argument, turn, credentials)

    async def _recover(self, session: LiveSession) -> None:
        """After a turn that ended by an exception (a failed write, a bug), make the session's
        events what its log holds, with the turn closed as recovery closes it (SPEC 2.5). If the
        log still cannot be written, the next prompt tries again."""
        try:
            await self.sessions.reopen(session)
        except (LogError, OSError) as exc:
            log.info("session %s: not reopened after a failed turn: %s", session.id, exc)
        self.bind(session)

    def _env(
        self, session: LiveSession, *, client_session_id: str | None = None, shown: bool = False
    ) -> TurnEnv:
        """A turn's environment; for a subagent's child, `client_session_id` is its parent's.
        A child `shown` to a client that advertised `subagents` streams its own updates and
        sends its requests under its own id; any other child runs unseen, its requests under
        its parent's id, the only one the client knows."""
        from ..agent.tools import ToolContext
        from ..agent.turn_env import TurnEnv

        surface = self.surface
        # A subagent's child runs under its parent's mode, model and prompt.
        top = self.sessions.live.get(client_session_id, session) if client_session_id else session
        client = SessionPort(top, self.client, self.permission_timeout)
        known_as = session.id if shown else client_session_id or session.id
        directories = [Path(d) for d in session.additional_directories]
        tools = ToolContext(
            known_as,
            Path(session.cwd),
            directories,
            client,
            session.allowed_always,
            mode=lambda: surface.mode_of(top),
            history=lambda: session.log.plain_events(),  # the log as it is at the call
            whole=partial(self.sessions.whole, session),
            kept=kept_from_tools(),
        )
        mcp = session.mcp
        settled_tools = None
        if mcp is not None and not mcp.settled.is_set():

            async def settled_tools() -> ToolRegistry:
                await mcp.wait_settled()
                return self.registry(session)

        env = TurnEnv(
            recorder=session.recorder,
            provider=self.provider,
            client=client,
            tools=tools,
            registry=self.registry(session),
            settled_tools=settled_tools,
            max_steps=self.max_steps,
            create_subagent=self._create_subagent if client_session_id is None else None,
            live_updates=client_session_id is None or shown,
            client_session_id=known_as,
            model=lambda: surface.settings(top).model,
            reasoning=lambda: surface.settings(top).reasoning,
            # A child's context usage is not its parent's to show (nor summed into it).
            usage_update=(
                (lambda usage: surface.usage_update(top, usage))
                if client_session_id is None
                else (lambda _usage: None)
            ),
            compact_limit=lambda: surface.compact_limit(top),
            keep_blob=partial(self.sessions.store.put_blob, session.id),
        )
        # Read at each model call: the mode may change between turns, and a child's tools
        # are set after this (its parent's).
        env.system = lambda: system_for(
            top, self.prompt_base, surface.mode_of(top), env.registry.definitions
        )
        return env

    def registry(self, session: LiveSession) -> ToolRegistry:
        """The session's tools: the built-in ones (`ask_user` only for a client that shows
        forms), then those of its MCP servers (a subagent's child gets its parent's)."""
        from ..agent.tools import BUILTIN_TOOLS

        extra = []
        if self.client.capabilities.elicitation_form:
            from ..agent.tools.elicitation import ASK_USER

            extra.append(ASK_USER)
        if session.mcp is not None:
            extra.extend(session.mcp.tools)
        return BUILTIN_TOOLS.extended(extra) if extra else BUILTIN_TOOLS

    def presenter(self, session: LiveSession) -> ToolPresenter:
        """The session's `ToolPresenter`, its registry looked up by the first call it shows: a
        replay without tool calls does not import the tools."""
        present: ToolPresenter | None = None

        def first_use(name: str, args: Any) -> ToolPresentation:
            nonlocal present
            if present is None:
                present = self.registry(session).present
            return present(name, args)

        return first_use

    async def _create_subagent(self, parent: TurnEnv) -> TurnEnv:
        """A `task` call's child: its own log (header `origin: "subagent"`), live while it runs.

        The child is registered as a live session so that it can be followed while its parent
        runs; it is closed and unregistered by `release_subagent` when its one turn ends. To a
        client that advertised `subagents` it is shown as a session of its own (announced by the
        parent's turn); to any other, its client requests (permissions, files) go out under the
        parent's session id, the only one that client knows.
        """
        parent_header = parent.recorder.header
        header = SessionHeader(
            version=SESSION_FORMAT_VERSION,
            id=self.sessions.new_id(),
            created_at=self.sessions.clock(),
            cwd=parent_header.cwd,
            parent_session=parent_header.id,
            origin="subagent",
            additional_directories=parent_header.additional_directories,
        )
        child = await self.sessions.create_child(header)
        self.bind(child)
        shown = self.client.capabilities.subagents
        env = self._env(child, client_session_id=parent.client_session_id, shown=shown)
        env.tools.allowed_always = parent.tools.allowed_always
        env.registry = parent.registry
        env.on_finished = lambda: self.sessions.release_child(child.id)
        return env

    # -- loading -------------------------------------------------------------------------------

    async def replay(
        self, session: LiveSession, max_messages: int | None, link: Attached
    ) -> TailCut:
        """Send the load replay of SPEC 4.2: every notification is sent, in order, before
        anything sent after this returns (the load's response). `link`, this client's
        attachment to the session, is held meanwhile: the live updates of a turn running in
        the session (those after the replay's last event: the events are read and the
        attachment's earlier updates dropped at one instant) follow the replay.

        To a client that advertised `subagents`, each `task` child of the replayed turns is
        replayed too, under its own id, where its live stream was (SPEC 4.7)."""
        held = session.log
        if held.base and (max_messages is None or len(held.message_seqs) < max_messages):
            await self.sessions.whole(session)  # loaded for a shorter tail before
        log_ = session.log
        cut = tail_start(log_, max_messages) if max_messages is not None else TailCut(0, False)
        shapes = self.client.capabilities
        records = log_.records_from(cut.start)
        link.restart()  # no await since the read: what it is sent next comes after its last
        try:
            link.replayed(await self._replay(session, records, shapes))
        finally:
            link.release()
        return cut

    async def _replay(
        self, session: LiveSession, records: Sequence[KeptRecord], shapes: ClientCapabilities
    ) -> list[SessionUpdate]:
        """Send the replay of `records`; the session's own updates it sent."""
        await session.mcp_settled_for(records)
        present = self.presenter(session)
        replays: dict[str, list[SessionUpdate]] = {}
        foreign: set[str] = set()
        if shapes.subagents:
            for child_id in (e.data.child_session_id for e in records if type(e) is SubagentStart):
                replay = await self._child_replay(session.id, child_id, present)
                if replay is None:
                    foreign.add(child_id)
                else:
                    replays[child_id] = replay
        updates = project_load(
            records,
            present,
            compactions=shapes.compaction,
            plan_operations=shapes.plan_operations,
            subagents=shapes.subagents,
            session_id=session.id,
            foreign_children=foreign,
        )
        if shapes.subagents:
            await self.client.notify_all(
                "session/update", with_children(session.id, updates, replays)
            )
            return updates
        await self.client.notify_all(
            "session/update", (SessionNotification(session.id, update) for update in updates)
        )
        return updates

    async def _child_replay(
        self, parent_id: str, child_id: str, present: ToolPresenter
    ) -> list[SessionUpdate] | None:
        """A `task` child's own replay, as its live stream showed it: empty when its log is
        gone or unreadable (the parent's updates still show the child: the best a load can
        do), None when its log names another parent (a fork's copy of another's child)."""
        try:
            source = await self.sessions.store.history(child_id)
            header = source.header
            if header.origin != "subagent" or header.parent_session != parent_id:
                return None
            records = await source.records(0, source.last_seq + 1)
        except (LogError, OSError) as exc:
            log.info("session %s: child %s not replayed: %s", parent_id, child_id, exc)
            return []
        updates = project_load(
            records,
            present,
            plan_operations=self.client.capabilities.plan_operations,
            session_id=child_id,
        )
        return child_replay(parent_id, child_id, updates)


def busy_error(session_id: str) -> SessionInUse:
    return SessionInUse(
        f"Session in use: a prompt turn is running in session {session_id}",
        {"reason": "prompt-running"},
    )
