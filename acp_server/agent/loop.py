"""The agent loop: one prompt turn, step by step, logged as it happens and shown live.

A turn appends `turn/start` and the `user/message`, then runs steps: each step asks the model
(the provider) for one streamed answer, logs every chunk as it arrives, shows text and thoughts
to the client, assembles the `assistant/message`, and runs the tool calls it holds. A step whose
stream finishes with `tool-calls` leads to the next step; any other finish ends the turn.

Durability follows SPEC 2.4: the log is synced before each model request, before each tool
runs, after each step and at the turn's end; chunks in between are flushed by the recorder's
100 ms flusher.

What a turn works with (`TurnEnv`) and where it is (`TurnState`) are in `agent.turn_env`; the
running of a step's tool calls, a `task` call's subagent included, is in `agent.tool_calls`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final, NoReturn

import anyio
from msgspec import UNSET

from ..core.acp_updates import (
    AgentMessageChunk,
    AgentThoughtChunk,
    CompactionShown,
    CompactionSummaryChunk,
    NoticeShown,
    SessionNotification,
    SessionUpdate,
    UsageShown,
    assistant_message_id,
    command_message_id,
    compaction_id,
    user_message_id,
)
from ..core.assembly import MessageAssembler
from ..core.compaction import SUMMARY_SYSTEM, due, summary_request
from ..core.content import ContentBlock, TextContent
from ..core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    ContextCompaction,
    ContextCompactionData,
    ErrorInfo,
    NoticeSeverity,
    SessionEvent,
    SessionNotice,
    SessionNoticeData,
    StepData,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndData,
    TurnEndReason,
    TurnEndReasonCancelled,
    TurnEndReasonCompleted,
    TurnEndReasonError,
    TurnEndReasonMaxSteps,
    TurnEndReasonMaxTokens,
    TurnEndReasonRefusal,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from ..core.messages import UserTurn, derive_messages
from ..core.stream import (
    AssistantBlock,
    AssistantText,
    FinishReason,
    ReasoningDelta,
    TextDelta,
)
from ..core.usage import nearly_full
from ..providers.base import ModelRequest, ProviderError, RetryReport
from ..storage.errors import LogWriteFailed
from .failures import ModelRequestFailed
from .recorder import SessionRecorder
from .tool_calls import ToolCalls
from .turn_env import StopReason, TurnEnv, TurnState

log = logging.getLogger(__name__)

CANCELLED_RESULT_TEXT: Final = "cancelled"

_FINISHES: Final[dict[FinishReason, tuple[Callable[[], TurnEndReason], StopReason]]] = {
    "stop": (TurnEndReasonCompleted, "end_turn"),
    "tool-calls": (TurnEndReasonCompleted, "end_turn"),
    "length": (TurnEndReasonMaxTokens, "max_tokens"),
    "content-filter": (TurnEndReasonRefusal, "refusal"),
}


class Turn:
    """One `session/prompt`: `await Turn(env, prompt).run()` gives the stop reason.

    `cancel()` (from `session/cancel`) stops the stream or the tool at once; the turn then
    records what was received and answers `cancelled`.

    With `compact` (the instructions of `/compact`, possibly empty) the turn is that command's:
    one summarising step, its `context/compaction` and a `command/result` (SPEC 4.4, 4.6).
    """

    def __init__(
        self,
        env: TurnEnv,
        prompt: list[ContentBlock],
        *,
        compact: str | None = None,
        message_id: str | None = None,
    ) -> None:
        self.env = env
        self.prompt = prompt
        self.compact = compact
        self.message_id = message_id
        """The id of its user message, when the prompt was given one as it was accepted (a v2
        prompt's receipt); else the turn's `user-N`."""
        self._turn_start = -1
        """The seq of this turn's `turn/start`, once written."""
        self._scope = anyio.CancelScope()
        self._state = TurnState(turn=env.recorder.log.turns)
        self._calls = ToolCalls(env, self._state, self._show, _run_child_turn)

    @property
    def number(self) -> int:
        """The turn's number in its session (its `turn/start`'s `turn`)."""
        return self._state.turn

    def cancel(self) -> None:
        self._scope.cancel()

    def cancel_tool_call(self, call_id: str) -> bool:
        """End the tool call `call_id` only, if it runs now; the turn goes on."""
        return self._calls.cancel(call_id)

    async def run(self) -> StopReason:
        rec = self.env.recorder
        state = self._state
        self._turn_start = rec.append(TurnStart, TurnStartData(state.turn)).seq
        rec.append(
            UserMessageEvent,
            UserMessageData(
                state.turn,
                UserMessage(self.message_id or user_message_id(state.turn), list(self.prompt)),
            ),
        )
        stop: StopReason | None = None
        try:
            with self._scope:
                await self._settle_tools()
                stop = await (self._steps() if self.compact is None else self._compact_turn())
        except anyio.get_cancelled_exc_class():
            # The request itself was cancelled from outside: close the turn, then let go.
            with anyio.CancelScope(shield=True):
                await self._close_cancelled()
            raise
        if stop is None:  # our own scope was cancelled: `session/cancel`
            await self._close_cancelled()
            return "cancelled"
        return stop

    async def _settle_tools(self) -> None:
        """Wait for the session's MCP servers still connecting (a `session/cancel` ends the
        wait): every model call of the turn is offered their tools, and what is said of
        those that failed is in the log before any step streams."""
        settled = self.env.settled_tools
        if settled is not None:
            self.env.registry = await settled()
            self.env.settled_tools = None

    # -- steps ---------------------------------------------------------------------------------

    async def _steps(self) -> StopReason:
        env, rec, state = self.env, self.env.recorder, self._state
        step = 0
        while step < env.max_steps:
            limit = env.compact_limit() if step + 1 < env.max_steps else None
            if limit is not None and due(list(rec.log.plain_events()), limit):
                # The prompt of a turn's first call stays after the summary, verbatim.
                through = self._turn_start - 1 if step == 0 else rec.last_seq
                if through >= 0:
                    await self._summarise(step, through, "")
                    step += 1
            state.step = step
            rec.append(StepStart, StepData(state.turn, step))
            state.step_open = True
            await rec.sync()  # before the model request
            finish = await self._stream_step()
            step += 1
            calls = state.assembler.tool_calls()
            if finish == "tool-calls" and calls:
                await self._calls.run()
                self._end_step()
                await rec.sync()
                continue
            self._end_step()
            reason, stop = _FINISHES[finish]
            rec.append(TurnEnd, TurnEndData(state.turn, reason()))
            await rec.sync()
            return stop
        rec.append(TurnEnd, TurnEndData(state.turn, TurnEndReasonMaxSteps()))
        await rec.sync()
        return "max_turn_requests"

    async def _compact_turn(self) -> StopReason:
        """`/compact`: summarise everything before this turn, then say so."""
        rec, state = self.env.recorder, self._state
        through = self._turn_start - 1
        if not derive_messages(_through(rec, through)):
            text, failed = "There is no conversation to compact yet.", True
        else:
            await self._summarise(0, through, self.compact or "")
            text, failed = "The conversation was compacted.", False
        await self._command_result(text, failed)
        rec.append(TurnEnd, TurnEndData(state.turn, TurnEndReasonCompleted()))
        await rec.sync()
        return "end_turn"

    async def _summarise(self, step: int, through: int, instructions: str) -> None:
        """One summarising model call as step `step`, then `context/compaction` (SPEC 4.6).

        A client that advertised `session.compaction` sees it as a compaction: `in_progress`,
        the summary's text as `compaction_summary_chunk`s, then `completed` with the summary
        (or `failed`, or `cancelled`); any other client sees the step's text as today."""
        env, rec, state = self.env, self.env.recorder, self._state
        state.step = step
        state.compaction = compaction_id(state.turn, step)
        rec.append(StepStart, StepData(state.turn, step))
        state.step_open = True
        await self._show_compaction(CompactionShown(state.compaction, "in_progress"))
        await rec.sync()  # before the model request
        history = derive_messages(_through(rec, through))
        history.append(UserTurn([TextContent(summary_request(instructions))]))
        request = ModelRequest(
            session_id=rec.session_id,
            messages=history,
            tools=[],
            system=SUMMARY_SYSTEM,
            model=env.model(),
            reasoning_effort=env.reasoning(),
            on_retry=self._retrying,
        )
        await self._stream_step(request)
        summary: list[ContentBlock] = [TextContent(_text_of(state.assembler.content()))]
        self._end_step()
        rec.append(ContextCompaction, ContextCompactionData(state.turn, step, through))
        done = CompactionShown(state.compaction, "completed", summary)
        state.compaction = None  # it is in the log: a cancel from here on leaves it whole
        with anyio.CancelScope(shield=True):
            await self._show_compaction(done)
        await rec.sync()

    async def _command_result(self, text: str, failed: bool) -> None:
        content: list[ContentBlock] = [TextContent(text)]
        self.env.recorder.append(
            CommandResult,
            CommandResultData(self._state.turn, "compact", content, True if failed else UNSET),
        )
        await self._show(AgentMessageChunk(content[0], command_message_id(self._state.turn)))

    async def _stream_step(self, request: ModelRequest | None = None) -> FinishReason:
        """Stream one model call into the log (the next step's, unless `request` is given);
        returns its finish reason."""
        env, rec, state = self.env, self.env.recorder, self._state
        turn, step = state.turn, state.step
        if request is None:
            request = ModelRequest(
                session_id=rec.session_id,
                messages=derive_messages(rec.log.plain_events()),
                tools=env.registry.definitions,
                system=env.system(),
                model=env.model(),
                reasoning_effort=env.reasoning(),
                on_retry=self._retrying,
            )
        state.assembler = assembler = MessageAssembler()
        state.first_chunk_seq = state.last_chunk_seq = -1
        message_id = assistant_message_id(turn, step)
        append, feed, show = rec.append, assembler.feed, self._show  # looked up once, not per chunk
        live = env.live_updates
        # A summary streams into its compaction for a client that takes them (its thoughts
        # are not the summary: they stay in the log only).
        summary_of = state.compaction if live and env.client.capabilities.compaction else None
        state.streaming = True
        try:
            async for chunk in env.provider.stream(request):
                event = append(AssistantChunk, AssistantChunkData(turn, step, chunk))
                if state.first_chunk_seq < 0:
                    state.first_chunk_seq = event.seq
                state.last_chunk_seq = event.seq
                feed(chunk)
                if summary_of is not None:
                    if type(chunk) is TextDelta:
                        await show(CompactionSummaryChunk(summary_of, TextContent(chunk.text)))
                elif live:
                    if type(chunk) is TextDelta:
                        await show(AgentMessageChunk(TextContent(chunk.text), message_id))
                    elif type(chunk) is ReasoningDelta:
                        await show(AgentThoughtChunk(TextContent(chunk.text), message_id))
            finish = assembler.finish
            if finish is None:
                raise ProviderError("the model stream ended without a finish chunk")
        except ProviderError as exc:
            state.streaming = False
            await self._fail(exc)
        except LogWriteFailed:
            raise  # the log, not the model, failed: nothing more can be recorded
        except Exception:  # a provider bug must still end the turn in the log, not leave it open
            log.exception("the model provider failed in session %s", rec.session_id)
            state.streaming = False
            await self._fail(
                ProviderError("the model provider failed unexpectedly (see the server's log)")
            )
        state.streaming = False
        rec.append(
            AssistantMessageEvent,
            AssistantMessageData(
                turn,
                step,
                AssistantMessage(message_id, assembler.content()),
                assembler.usage if assembler.usage is not None else UNSET,
            ),
            **self._source_range(),
        )
        if assembler.usage is not None:
            update = env.usage_update(assembler.usage)
            if update is not None:
                await self._show(update)
            if type(update) is UsageShown and state.compaction is None:
                # A summarising call's input is the history it replaces: not a measure.
                await self._warn_if_nearly_full(update)
        return finish

    async def _warn_if_nearly_full(self, usage: UsageShown) -> None:
        """A notice when this model call's usage crossed into the top of the context window."""
        used = nearly_full(self.env.recorder.log.plain_events(), usage.size)
        if used is None:
            return
        limit = self.env.compact_limit()
        then = (
            "The conversation will be compacted before the next model call."
            if limit is not None and used >= limit
            else "/compact summarises the conversation to free it."
        )
        await self._notice(
            "warning",
            "Context window nearly full",
            f"The last model call used {used} of {usage.size} tokens "
            f"({used * 100 // usage.size}%). {then}",
        )

    async def _retrying(self, report: RetryReport) -> None:
        """The provider retries the model request: a notice saying why and when."""
        status = f" ({report.status})" if report.status is not None else ""
        await self._notice(
            "warning",
            f"Model request failed{status}; retrying",
            f"{report.message}. Attempt {report.attempt} of {report.attempts} "
            f"in {report.delay:g} s.",
        )

    async def _fail(self, exc: ProviderError) -> NoReturn:
        """A failed model request: no message (the partial output stays as chunks); the step
        and the turn are closed with the error, which is raised as `ModelRequestFailed`."""
        rec, state = self.env.recorder, self._state
        self._end_step()
        if state.compaction is not None:
            failed = CompactionShown(state.compaction, "failed", error=exc.message)
            state.compaction = None
            await self._show_compaction(failed)
            await self._notice("error", "Compaction failed", exc.message)
        if self.compact is not None:
            await self._command_result(f"The conversation was not compacted: {exc.message}", True)
        error = ErrorInfo(exc.message, exc.code if exc.code is not None else UNSET)
        rec.append(TurnEnd, TurnEndData(state.turn, TurnEndReasonError(error)))
        await rec.sync()
        raise ModelRequestFailed(exc.message, exc.code)

    def _source_range(self) -> dict[str, Any]:
        state = self._state
        if state.first_chunk_seq < 0:
            return {}
        return {"source_range": (state.first_chunk_seq, state.last_chunk_seq)}

    def _end_step(self) -> None:
        state = self._state
        if state.step_open:
            self.env.recorder.append(StepEnd, StepData(state.turn, state.step))
            self.env.recorder.seal()
            state.step_open = False

    # -- tools ---------------------------------------------------------------------------------

    # -- cancellation --------------------------------------------------------------------------

    async def _close_cancelled(self) -> None:
        rec, state = self.env.recorder, self._state
        if state.streaming and state.compaction is not None and self.compact is None:
            # A summary cut short is no message of the conversation: the model's history must
            # not take it for an answer. Its chunks keep what arrived, as a failed stream's do.
            state.streaming = False
        if state.streaming:
            state.streaming = False
            content = state.assembler.content(interrupted=True)
            rec.append(
                AssistantMessageEvent,
                AssistantMessageData(
                    state.turn,
                    state.step,
                    AssistantMessage(assistant_message_id(state.turn, state.step), content),
                    interrupted=True,
                ),
                **self._source_range(),
            )
        finished = [
            (
                self._calls.log_result(call_id, [TextContent(CANCELLED_RESULT_TEXT)], True, UNSET),
                call.data.name,
            )
            for call_id, call in list(state.open_calls.items())
        ]
        self._end_step()
        if self.compact is not None:  # the command's turn, so that the model never sees it
            rec.append(
                CommandResult,
                CommandResultData(
                    state.turn, "compact", [TextContent("The compaction was cancelled.")], True
                ),
            )
        rec.append(TurnEnd, TurnEndData(state.turn, TurnEndReasonCancelled()))
        await rec.sync()
        for result, name in finished:
            await self._calls.show_finished(result, name)
        if state.compaction is not None:
            cancelled = CompactionShown(state.compaction, "cancelled")
            state.compaction = None
            await self._show_compaction(cancelled)

    # -- showing -------------------------------------------------------------------------------

    async def _show(self, update: SessionUpdate) -> None:
        env = self.env
        if env.live_updates:
            session_id = env.client_session_id or env.recorder.session_id
            await env.client.notify("session/update", SessionNotification(session_id, update))

    async def _show_compaction(self, update: CompactionShown) -> None:
        """A compaction's state, to a client that advertised `session.compaction` only."""
        if self.env.client.capabilities.compaction:
            await self._show(update)

    async def _notice(
        self, severity: NoticeSeverity, title: str, description: str | None = None
    ) -> None:
        """A `session/notice` in the log, shown as a `notice` to a client that advertised
        `session.notices` (any other client sees nothing of it, as before notices)."""
        shown = UNSET if description is None else description
        self.env.recorder.append(SessionNotice, SessionNoticeData(severity, title, shown))
        if self.env.client.capabilities.notices:
            await self._show(NoticeShown(severity, title, shown))


async def _run_child_turn(child: TurnEnv, prompt: list[ContentBlock]) -> StopReason:
    """A subagent's turn, its chunks flushed by a flusher of its own while it runs (SPEC 2.4:
    the parent's flusher only writes the parent's log)."""
    failure: Exception | None = None
    async with anyio.create_task_group() as flushing:
        flushing.start_soon(child.recorder.run_flusher)
        try:
            stop = await Turn(child, prompt).run()
        except Exception as exc:
            failure = exc
        finally:
            flushing.cancel_scope.cancel()
    if failure is not None:
        raise failure  # unwrapped: a failed model request must not arrive as an ExceptionGroup
    return stop


def _through(rec: SessionRecorder, seq: int) -> list[SessionEvent]:
    """The events up to `seq`, as far as the provider history reads them (no packed chunks)."""
    return [e for e in rec.log.plain_events() if e.seq <= seq]


def _text_of(content: list[AssistantBlock]) -> str:
    return "".join(b.text for b in content if type(b) is AssistantText)
