"""ACP v2 prompt turns: `session/prompt` answers at once with its receipt, the turn runs after.

A v2 prompt, once accepted (its blocks within the size limit, the session live, the provider's
key there), is answered `{messageId}`: the id its user message is logged with, chosen now. The
prompter is then shown its message whole (`user_message`), and the turn runs, as v1's does, in
the registry's services where turns outlive their client, else on the connection; its course
reaches every attached v2 client as `state_update`s (running, requires_action, idle with its
stop reason).
`session/cancel` is v1's handler: the turn ends idle `cancelled`.

The receipt id is `user-N-K`: N the session's turn count when the prompt was accepted, K the
prompts accepted for that session in this process. A prompt accepted at N runs as turn N or
later, so an id of the log is never given again; it is never a v1 prompt's `user-N`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Final

from msgspec import UNSET, Struct, field

from ...core.acp_updates import SessionNotification, StateShown, UserMessageShown
from ...core.content import ContentBlock, Meta_
from ..attached import CLIENT_GONE
from ..errors import ConnectionClosed, InvalidParams, echoed
from ..live import Place, check_not_child
from ..params import check_session_id
from ..protocol import CloseSessionRequest, Empty, Inbound, PromptRequest
from ..rpc import Then
from .host import Agent

if TYPE_CHECKING:
    from ..live import LiveSession
    from ..sessions import SessionRegistry

log = logging.getLogger(__name__)

VERSION: Final = 2


class PromptReceipt(Struct, rename="camel", omit_defaults=True, gc=False):
    """The v2 `session/prompt` answer: the id of the user message the prompt became."""

    message_id: str
    meta: Meta_ = field(default=UNSET, name="_meta")


class CancelToolCallRequest(Inbound):
    session_id: str
    tool_call_id: str


class CancelTerminalRequest(Inbound):
    session_id: str
    terminal_id: str


def receipt_id(sessions: SessionRegistry, session: LiveSession) -> str:
    """The id of a prompt accepted for `session` now (see the module docstring)."""
    counts = sessions.prompts_accepted
    accepted = counts.get(session.id, 0)
    counts[session.id] = accepted + 1
    return f"user-{session.log.turns}-{accepted}"


class V2Turns:
    """The v2 turn methods of one connection's agent."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def install(self) -> None:
        route = self.agent.connection.route
        route("session/prompt", self.prompt, PromptRequest, version=VERSION)
        route("tool_call/cancel", self.cancel_tool_call, CancelToolCallRequest, version=VERSION)
        route("terminal/cancel", self.cancel_terminal, CancelTerminalRequest, version=VERSION)
        route("session/close", self.close, CloseSessionRequest, version=VERSION)

    async def prompt(self, request: PromptRequest) -> Then:
        agent = self.agent
        agent.check_prompt(request.prompt)
        session = agent.sessions.get(check_session_id(request.session_id))
        agent.check_auth()  # logged out since: answered now, not by a failed turn
        agent.attach(session)  # a session live here may be driven from any connection
        place = agent.conversations.admit(session)  # before any wait: a cancel after finds it
        message_id = receipt_id(agent.sessions, session)
        prompt = list(request.prompt)

        def then() -> None:
            self._start(session, prompt, message_id, place)

        def unsent() -> None:  # no receipt, no turn
            agent.conversations.leave(session, place)

        return Then(PromptReceipt(message_id), then, unsent)

    def _start(
        self, session: LiveSession, prompt: list[ContentBlock], message_id: str, place: Place
    ) -> None:
        """Run the accepted prompt's turn: where turns outlive their client, in the registry's
        services (it goes on when this client goes), else on this connection."""
        agent = self.agent
        port = agent.port

        async def run() -> None:
            try:
                # If the client has gone the turn goes on: the log keeps what it was shown.
                with contextlib.suppress(*CLIENT_GONE):
                    await port.notify(
                        "session/update",
                        SessionNotification(session.id, UserMessageShown(message_id, prompt)),
                    )
                await agent.conversations.prompt(session, prompt, place, message_id)
            except CLIENT_GONE:
                pass
            except Exception as exc:  # its idle `error` said so; the log has the rest
                log.info("session %s: turn of %s failed: %s", session.id, message_id, exc)

        services = agent.sessions.services
        try:
            if services is not None and agent.turns_outlive:
                services.start_soon(run)
            else:
                agent.connection.start_soon(run)
        except (ConnectionClosed, RuntimeError):  # its client went as it was answered
            log.info("session %s: %s not run, its client has gone", session.id, message_id)
            agent.conversations.leave(session, place)

    async def close(self, request: CloseSessionRequest) -> Empty:
        """v1's `session/close`, but a turn it cancels (no other client holds the session)
        ends for this client idle `cancelled` before the answer, and nothing follows."""
        agent = self.agent
        session = agent.sessions.live.get(request.session_id)
        if session is not None:
            check_not_child(session.header)  # refused before anything is shown
        if (
            session is not None
            and session.turn is not None
            and set(session.clients) <= {agent.port}
        ):
            session.detach(agent.port)  # the turn's own updates stop reaching it here
            cancelled = StateShown("idle", "cancelled")
            with contextlib.suppress(*CLIENT_GONE):
                await agent.port.notify(
                    "session/update", SessionNotification(session.id, cancelled)
                )
        return await agent.close_session(request)

    async def cancel_tool_call(self, request: CancelToolCallRequest) -> Empty:
        """`tool_call/cancel`: the running tool call ends, its result saying it was cancelled
        (status `failed`: v1's statuses have no `cancelled`); the turn goes on."""
        session = self.agent.sessions.get(check_session_id(request.session_id))
        turn = session.turn
        if turn is None or not turn.cancel_tool_call(request.tool_call_id):
            raise InvalidParams.at(
                "$.toolCallId",
                f"{echoed(request.tool_call_id)} is not a tool call running in session "
                f"{session.id}",
            )
        return Empty()

    async def cancel_terminal(self, request: CancelTerminalRequest) -> Empty:
        """`terminal/cancel`: the server shows no terminals of its own (commands run as tool
        calls), so there is never one to cancel."""
        check_session_id(request.session_id)
        raise InvalidParams.at("$.terminalId", f"no such terminal: {echoed(request.terminal_id)}")


def install(agent: Agent) -> None:
    """Route the v2 turn methods on `agent`'s connection (v2 connections only)."""
    V2Turns(agent).install()
