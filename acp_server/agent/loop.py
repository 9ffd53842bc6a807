"""The agent loop: one prompt turn, step by step, logged as it happens and shown live.

A turn appends `turn/start` and the `user/message`, then runs steps: each step asks the model
(the provider) for one streamed answer, logs every chunk as it arrives, shows text and thoughts
to the client, assembles the `assistant/message`, and runs the tool calls it holds. A step whose
stream finishes with `tool-calls` leads to the next step; any other finish ends the turn.

Durability follows SPEC 2.4: the log is synced before each model request, before each tool
runs, after each step and at the turn's end; chunks in between are flushed by the recorder's
100 ms flusher.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, NoReturn

import anyio
import msgspec
from msgspec import UNSET

from ..core.acp_updates import (
    AgentMessageChunk,
    AgentThoughtChunk,
    CompactionShown,
    CompactionSummaryChunk,
    NoticeShown,
    SessionNotification,
    SessionUpdate,
    ToolCallContent,
    UsageShown,
    assistant_message_id,
    command_message_id,
    compaction_id,
    plan_shown,
    tool_call_finished,
    tool_call_in_progress,
    tool_call_started,
    user_message_id,
)
from ..core.assembly import MessageAssembler
from ..core.compaction import SUMMARY_SYSTEM, due, summary_request
from ..core.content import ContentBlock, TextContent, ToolResultContent
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
    PlanUpdate,
    PlanUpdateData,
    SessionEvent,
    SessionNotice,
    SessionNoticeData,
    StepData,
    StepEnd,
    StepStart,
    SubagentStart,
    SubagentStartData,
    ToolCall,
    ToolCallData,
    ToolCallLocation,
    ToolResult,
    ToolResultData,
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
from ..core.json_values import map_strings
from ..core.messages import UserTurn, derive_messages
from ..core.stream import (
    AssistantBlock,
    AssistantText,
    FinishReason,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from ..core.subagent_updates import prompt_received, subagent_finished, subagent_started
from ..core.usage import nearly_full
from ..providers.base import KeyHolder, ModelRequest, Provider, ProviderError, RetryReport
from ..storage.errors import LogWriteFailed
from .failures import ModelRequestFailed
from .limits import DEFAULT_MAX_STEPS
from .ports import ClientPort
from .recorder import SessionRecorder
from .tools import (
    BUILTIN_TOOLS,
    TaskArgs,
    ToolContext,
    ToolOutcome,
    ToolRegistry,
    invalid_arguments,
    run_tool,
)

log = logging.getLogger(__name__)

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]

CANCELLED_RESULT_TEXT: Final = "cancelled"

_FINISHES: Final[dict[FinishReason, tuple[Callable[[], TurnEndReason], StopReason]]] = {
    "stop": (TurnEndReasonCompleted, "end_turn"),
    "tool-calls": (TurnEndReasonCompleted, "end_turn"),
    "length": (TurnEndReasonMaxTokens, "max_tokens"),
    "content-filter": (TurnEndReasonRefusal, "refusal"),
}


SubagentFactory = Callable[["TurnEnv"], Awaitable["TurnEnv"]]
"""Creates a `task` call's child session (its log, header `origin: "subagent"`) and its env."""


@dataclass
class TurnEnv:
    """Everything a turn works with, for one session."""

    recorder: SessionRecorder
    provider: Provider
    client: ClientPort
    tools: ToolContext
    max_steps: int = DEFAULT_MAX_STEPS
    create_subagent: SubagentFactory | None = None
    live_updates: bool = True
    """Subagent turns run unseen (only their parent's `task` call is shown to the client),
    unless the client advertised `subagents`: then under their own session id."""
    client_session_id: str = ""
    """The session id the client knows: the session's own, or an unseen child's parent's."""
    on_finished: Callable[[], None] | None = None
    """For a subagent: called once its turn is over and its log closed."""
    registry: ToolRegistry = BUILTIN_TOOLS
    """The session's tools: the built-in ones and those of its MCP servers."""
    model: Callable[[], str | None] = lambda: None
    """The session's chosen model and reasoning effort (SPEC 4.4), read at each model call;
    None leaves them to the provider."""
    reasoning: Callable[[], str | None] = lambda: None
    usage_update: Callable[[Usage], SessionUpdate | None] = lambda _usage: None
    """The `usage_update` to show after a model call that reported usage, if any."""
    compact_limit: Callable[[], int | None] = lambda: None
    """The tokens of the last usage at which the next model call compacts first (SPEC 4.6);
    None never compacts by itself."""
    system: Callable[[], str | None] = lambda: None
    """The session's system prompt, read at each model call (the client's `systemPrompt`
    may change it on a load or resume); None: no system prompt."""


@dataclass
class _TurnState:
    turn: int
    step: int = -1
    step_open: bool = False
    streaming: bool = False
    assembler: MessageAssembler = field(default_factory=MessageAssembler)
    first_chunk_seq: int = -1
    last_chunk_seq: int = -1
    open_calls: dict[str, ToolCall] = field(default_factory=dict)
    compaction: str | None = None
    """The id of the compaction whose summarising step runs now, if one does."""


class Turn:
    """One `session/prompt`: `await Turn(env, prompt).run()` gives the stop reason.

    `cancel()` (from `session/cancel`) stops the stream or the tool at once; the turn then
    records what was received and answers `cancelled`.

    With `compact` (the instructions of `/compact`, possibly empty) the turn is that command's:
    one summarising step, its `context/compaction` and a `command/result` (SPEC 4.4, 4.6).
    """

    def __init__(
        self, env: TurnEnv, prompt: list[ContentBlock], *, compact: str | None = None
    ) -> None:
        self.env = env
        self.prompt = prompt
        self.compact = compact
        self._turn_start = -1
        """The seq of this turn's `turn/start`, once written."""
        self._scope = anyio.CancelScope()
        self._state = _TurnState(turn=env.recorder.log.turns)
        self._children: dict[str, str] = {}
        """Call id -> child session id, for the `task` calls of this turn that started one."""
        # The calls of this turn may run subagents when the session can create them.
        self._tools = (
            replace(env.tools, subagents=self._run_task)
            if env.create_subagent is not None
            else env.tools
        )

    @property
    def number(self) -> int:
        """The turn's number in its session (its `turn/start`'s `turn`)."""
        return self._state.turn

    def cancel(self) -> None:
        self._scope.cancel()

    async def run(self) -> StopReason:
        rec = self.env.recorder
        state = self._state
        self._turn_start = rec.append(TurnStart, TurnStartData(state.turn)).seq
        rec.append(
            UserMessageEvent,
            UserMessageData(
                state.turn, UserMessage(user_message_id(state.turn), list(self.prompt))
            ),
        )
        stop: StopReason | None = None
        try:
            with self._scope:
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
                await self._run_tools()
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

    async def _run_tools(self) -> None:
        env, rec, state = self.env, self.env.recorder, self._state
        calls = state.assembler.tool_calls()
        for block in calls:
            event = rec.append(
                ToolCall,
                ToolCallData(state.turn, state.step, block.id, block.name, block.arguments),
            )
            state.open_calls[block.id] = event
        present = env.registry.present
        announcements = [tool_call_started(b.id, b.name, b.arguments, present) for b in calls]
        for announcement in announcements:
            await self._show(announcement)
        for block, announcement in zip(calls, announcements, strict=True):
            await rec.sync()  # before each tool runs

            async def on_started(
                content: list[ToolCallContent] | None = None,
                call_id: str = block.id,
                name: str = block.name,
            ) -> None:
                shown = UNSET if content is None else content
                await self._show(tool_call_in_progress(call_id, name, shown))

            outcome = await run_tool(
                env.registry,
                self._tools,
                block.id,
                block.name,
                block.arguments,
                title=announcement.title,
                kind=announcement.kind,
                on_started=on_started,
            )
            result = self._log_result(
                block.id, outcome.content, outcome.is_error, outcome.raw_output, outcome.locations
            )
            await self._show_finished(result, block.name)
            if outcome.plan is not None:
                rec.append(PlanUpdate, PlanUpdateData(outcome.plan))
                operations = env.client.capabilities.plan_operations
                await self._show(plan_shown(outcome.plan, operations))

    async def _run_task(
        self, call_id: str, arguments: str, on_started: Callable[[], Awaitable[None]]
    ) -> ToolOutcome:
        """A `task` call: a one-shot subagent in a child session; its final text is the result."""
        try:
            args = msgspec.json.decode(arguments, type=TaskArgs)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return invalid_arguments("task", exc)
        assert self.env.create_subagent is not None
        child = await self.env.create_subagent(self.env)
        state = self._state
        child_id = child.recorder.session_id
        self.env.recorder.append(
            SubagentStart,
            SubagentStartData(state.turn, state.step, call_id, child_id, "one-shot"),
        )
        if self._shows_subagents():
            self._children[call_id] = child_id
            for update in subagent_started(self._session_id(), child_id, args.prompt):
                await self._show(update)
            if child.live_updates:  # the child's own stream begins with what it was sent
                received = prompt_received(self._session_id(), child_id, [TextContent(args.prompt)])
                await child.client.notify("session/update", SessionNotification(child_id, received))
        await on_started()
        try:
            stop = await _run_child_turn(child, [TextContent(args.prompt)])
        except ModelRequestFailed as exc:
            return ToolOutcome(
                [TextContent(f"the subagent failed: {exc.message}")],
                True,
                {"childSessionId": child.recorder.session_id, "error": exc.message},
                None,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await child.recorder.close()
            if child.on_finished is not None:
                child.on_finished()
        text = _final_text(list(child.recorder.log.plain_events()))
        return ToolOutcome(
            [TextContent(text)],
            stop != "end_turn",
            {"childSessionId": child.recorder.session_id, "stopReason": stop},
            None,
        )

    def _log_result(
        self,
        call_id: str,
        content: list[ToolResultContent],
        is_error: bool,
        raw_output: Any,
        locations: list[ToolCallLocation] | None = None,
    ) -> ToolResultData:
        """Append a call's `tool/result` (its content scrubbed of the key); returns its data."""
        state = self._state
        call = state.open_calls.pop(call_id)
        content, raw_output = self._scrubbed(content, raw_output)
        result = ToolResultData(
            state.turn,
            state.step,
            call_id,
            content,
            True if is_error else UNSET,
            raw_output,
            UNSET if locations is None else locations,
        )
        self.env.recorder.append(ToolResult, result, source_range=(call.seq, call.seq))
        return result

    async def _show_finished(self, result: ToolResultData, name: str) -> None:
        """Show the closing `tool_call_update` of a call to the tool `name`, after its child's
        answer and idle state when the call ran a subagent shown as such."""
        child_id = self._children.pop(result.call_id, None)
        if child_id is not None:
            for update in subagent_finished(self._session_id(), child_id, result):
                await self._show(update)
        await self._show(tool_call_finished(result, name))

    def _shows_subagents(self) -> bool:
        """Whether this turn's client is shown `task` children as subagent sessions."""
        return self.env.live_updates and self.env.client.capabilities.subagents

    def _session_id(self) -> str:
        """The id of the session as the client knows it."""
        return self.env.client_session_id or self.env.recorder.session_id

    def _scrubbed(
        self, content: list[ToolResultContent], raw_output: Any
    ) -> tuple[list[ToolResultContent], Any]:
        """`content` and `raw_output` without the provider's key. Every tool's result (built-in,
        command, MCP) enters the log here, and a command or a file may well print the key: this
        is the one place it is taken out before it is logged, shown or sent to the model."""
        provider = self.env.provider
        key = provider.api_key if isinstance(provider, KeyHolder) else None
        if key is None or not key.reveal():
            return content, raw_output
        found = False

        def scrub(text: str) -> str:
            nonlocal found
            scrubbed = key.scrub(text)
            found = found or scrubbed is not text
            return scrubbed

        shown = map_strings(msgspec.to_builtins(content), scrub)
        if found:
            content = msgspec.convert(shown, list[ToolResultContent])
        if raw_output is not UNSET:
            raw_output = map_strings(msgspec.to_builtins(raw_output), scrub)
        return content, raw_output

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
                self._log_result(call_id, [TextContent(CANCELLED_RESULT_TEXT)], True, UNSET),
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
            await self._show_finished(result, name)
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


def _final_text(events: list[SessionEvent]) -> str:
    """The text of the last assistant message that has any: a subagent's answer."""
    for event in reversed(events):
        if type(event) is AssistantMessageEvent:
            text = "".join(b.text for b in event.data.message.content if type(b) is AssistantText)
            if text:
                return text
    return ""
