"""What a turn works with: `TurnEnv`, one per session; `TurnState`, where a running turn is; and
`StopReason`, what a turn answers its `session/prompt` with.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from ..core.acp_updates import SessionUpdate
from ..core.assembly import MessageAssembler
from ..core.events import ToolCall
from ..core.stream import Usage
from ..providers.base import Provider
from .limits import DEFAULT_MAX_STEPS
from .ports import ClientPort
from .recorder import SessionRecorder
from .tools import BUILTIN_TOOLS, ToolContext, ToolRegistry

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]

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
    settled_tools: Callable[[], Awaitable[ToolRegistry]] | None = None
    """Set while the session's MCP servers are still connecting: waits for them to settle
    (bounded by their connect timeout) and gives the complete `registry`. A turn awaits it
    before its first model call, so a server still connecting has its tools offered."""
    model: Callable[[], str | None] = lambda: None
    """The session's chosen model and reasoning effort (SPEC 4.4), read at each model call;
    None leaves them to the provider."""
    reasoning: Callable[[], str | None] = lambda: None
    usage_update: Callable[[Usage], SessionUpdate | None] = lambda _usage: None
    """The `usage_update` to show after a model call that reported usage, if any."""
    compact_limit: Callable[[], int | None] = lambda: None
    """The tokens of the last usage at which the next model call compacts first (SPEC 4.6);
    None never compacts by itself."""
    keep_blob: Callable[[bytes], Awaitable[str]] | None = None
    """Keeps a file's content with the session in the store (its digest returned): the
    checkpoints of the files the tools change. None: nothing is kept (no `/rewind`)."""
    system: Callable[[], str | None] = lambda: None
    """The session's system prompt, read at each model call (the client's `systemPrompt`
    may change it on a load or resume); None: no system prompt."""


@dataclass
class TurnState:
    """Where a turn is: its step, its stream and what it assembles, its open tool calls."""

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
