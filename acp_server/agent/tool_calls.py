"""A turn's tool calls: the calls of a step's message logged, announced, run one by one and
shown as they finish, the files they changed kept as checkpoints; a `task` call's one-shot
subagent run in its child session; and every result scrubbed of the provider's key, and of every
other key the server holds, before it is logged, shown or sent to the model.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from msgspec import UNSET

from ..core.acp_updates import (
    SessionNotification,
    SessionUpdate,
    ToolCallContent,
    plan_shown,
    tool_call_finished,
    tool_call_in_progress,
    tool_call_started,
)
from ..core.blobs import blob_digest
from ..core.content import ContentBlock, TextContent, ToolResultContent
from ..core.events import (
    AssistantMessageEvent,
    FileCheckpoint,
    PermissionDecision,
    PermissionDecisionData,
    PermissionOutcome,
    PlanUpdate,
    PlanUpdateData,
    SessionEvent,
    SubagentStart,
    SubagentStartData,
    ToolCall,
    ToolCallData,
    ToolCallLocation,
    ToolResult,
    ToolResultData,
)
from ..core.json_values import map_strings
from ..core.stream import AssistantText
from ..core.subagent_updates import prompt_received, subagent_finished, subagent_started
from ..providers.base import KeyHolder
from ..storage.errors import LogError
from .failures import ModelRequestFailed
from .tools import TaskArgs, ToolOutcome, invalid_arguments, run_tool
from .tools.base import FileChange
from .turn_env import StopReason, TurnEnv, TurnState

if TYPE_CHECKING:
    from ..providers.base import Secret

log = logging.getLogger(__name__)

ChildTurn = Callable[[TurnEnv, list[ContentBlock]], Awaitable[StopReason]]
"""Runs a subagent's turn in its child session (the agent loop's own, handed in)."""


CANCELLED_CALL = "The user cancelled this tool call before it finished."


class ToolCalls:
    """The tool calls of one turn, run in its state and shown through its `show`."""

    def __init__(
        self,
        env: TurnEnv,
        state: TurnState,
        show: Callable[[SessionUpdate], Awaitable[None]],
        run_child: ChildTurn,
    ) -> None:
        self.env = env
        self._state = state
        self._show = show
        self._run_child = run_child
        self._children: dict[str, str] = {}
        """Call id -> child session id, for the `task` calls of this turn that started one."""
        self._running: dict[str, anyio.CancelScope] = {}
        """Call id -> the scope of the call running now (`cancel`)."""
        self._held: tuple[Secret, ...] = ()
        """The other keys held when the last call finished (`KeptFromTools.held`)."""
        # The calls of this turn may run subagents when the session can create them; their
        # permission answers are logged in this turn's step.
        self._tools = replace(
            env.tools,
            subagents=self._run_task if env.create_subagent is not None else env.tools.subagents,
            on_permission=self._decided,
        )

    async def run(self) -> None:
        """Log the `tool/call`s of the step's message, announce them, then run them one by one:
        each logged with its `tool/result` and shown as it finishes."""
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

            with anyio.CancelScope() as scope:
                self._running[block.id] = scope
                try:
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
                finally:
                    del self._running[block.id]
            if scope.cancelled_caught:
                outcome = ToolOutcome([TextContent(CANCELLED_CALL)], True)
            held = env.tools.kept.held
            if held is not None:  # after the call: it may have stored a key
                self._held = await held()
            checkpoints = await self._checkpoints(outcome.changes)
            result = self.log_result(
                block.id,
                outcome.content,
                outcome.is_error,
                outcome.raw_output,
                outcome.locations,
                checkpoints,
            )
            await self.show_finished(result, block.name)
            if outcome.plan is not None:
                rec.append(PlanUpdate, PlanUpdateData(outcome.plan))
                operations = env.client.capabilities.plan_operations
                await self._show(plan_shown(outcome.plan, operations))

    def cancel(self, call_id: str) -> bool:
        """End the call `call_id` if it is running (the client's `tool_call/cancel`): its
        result says it was cancelled, and the turn goes on. False when it is not running."""
        scope = self._running.get(call_id)
        if scope is None:
            return False
        scope.cancel()
        return True

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
            stop = await self._run_child(child, [TextContent(args.prompt)])
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

    def _decided(self, call_id: str, outcome: PermissionOutcome, option_id: str | None) -> None:
        """A permission request of this step's call `call_id` was answered (or cancelled)."""
        state = self._state
        self.env.recorder.append(
            PermissionDecision,
            PermissionDecisionData(
                state.turn, state.step, call_id, outcome, UNSET if option_id is None else option_id
            ),
        )

    def log_result(
        self,
        call_id: str,
        content: list[ToolResultContent],
        is_error: bool,
        raw_output: Any,
        locations: list[ToolCallLocation] | None = None,
        checkpoints: list[FileCheckpoint] | None = None,
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
            checkpoints if checkpoints else UNSET,
        )
        self.env.recorder.append(ToolResult, result, source_range=(call.seq, call.seq))
        return result

    async def _checkpoints(self, changes: list[FileChange] | None) -> list[FileCheckpoint]:
        """Keep what each changed file held before (its blob in the store) and say so: a
        checkpoint per file. A content holding a key (`_keys`) is not kept (the store, like
        the log, never holds it): that file is not checkpointed, and a rewind leaves it."""
        keep = self.env.keep_blob
        if not changes or keep is None:
            return []
        secrets = [key.reveal().encode() for key in self._keys()]
        checkpoints = []
        for change in changes:
            if any(
                secret in data
                for data in (change.before, change.after)
                if data is not None
                for secret in secrets
            ):
                continue
            try:
                before = None if change.before is None else await keep(change.before)
            except (LogError, OSError) as exc:
                # The file is changed already: the turn goes on, only its rewind is lost.
                log.warning("%s: no checkpoint kept: %s", change.path, exc)
                continue
            checkpoints.append(FileCheckpoint(change.path, before, blob_digest(change.after)))
        return checkpoints

    async def show_finished(self, result: ToolResultData, name: str) -> None:
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
        """`content` and `raw_output` without any key (`_keys`). Every tool's result (built-in,
        command, MCP) enters the log here, and a command or a file may well print a key: this
        is the one place they are taken out before it is logged, shown or sent to the model."""
        keys = self._keys()
        if not keys:
            return content, raw_output
        found = False

        def scrub(text: str) -> str:
            nonlocal found
            scrubbed = text
            for key in keys:
                scrubbed = key.scrub(scrubbed)
            found = found or scrubbed is not text
            return scrubbed

        shown = map_strings(msgspec.to_builtins(content), scrub)
        if found:
            content = msgspec.convert(shown, list[ToolResultContent])
        if raw_output is not UNSET:
            raw_output = map_strings(msgspec.to_builtins(raw_output), scrub)
        return content, raw_output

    def _keys(self) -> list[Secret]:
        """The provider's key (whatever its length) and the other keys held, longest first:
        a key that is part of another is not scrubbed first, leaving the rest of the longer."""
        provider = self.env.provider
        key = provider.api_key if isinstance(provider, KeyHolder) else None
        keys = {k.reveal(): k for k in self._held}
        if key is not None and key.reveal():
            keys[key.reveal()] = key
        return [keys[value] for value in sorted(keys, key=len, reverse=True)]


def _final_text(events: list[SessionEvent]) -> str:
    """The text of the last assistant message that has any: a subagent's answer."""
    for event in reversed(events):
        if type(event) is AssistantMessageEvent:
            text = "".join(b.text for b in event.data.message.content if type(b) is AssistantText)
            if text:
                return text
    return ""
