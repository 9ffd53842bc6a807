"""The shapes every tool shares: its context, its outcome, its limits and its failure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from msgspec import UNSET

from ...core.content import TextContent, ToolResultContent
from ...core.events import PermissionOutcome, PlanEntry, SessionEvent, ToolCallLocation
from ...core.modes import DEFAULT_MODE
from ..confinement import Directories
from ..ports import ClientPort

if TYPE_CHECKING:
    from ...providers.base import HeldSecrets

T = TypeVar("T")

PermissionListener = Callable[[str, PermissionOutcome, str | None], None]
"""Told how each permission request ended (call id, outcome, chosen option id): the turn logs
it as a `permission/decision` event."""

SubagentRunner = Callable[[str, str, Callable[[], Awaitable[None]]], Awaitable["ToolOutcome"]]
"""Runs a `task` call (call id, raw arguments, on_started) as a subagent: the loop's."""


@dataclass(frozen=True)
class ToolLimits:
    """Caps that keep one tool call from flooding the model, the log or the server's memory."""

    read_bytes: int = 1 << 20
    """The most bytes `read_file` returns; a longer file is cut with a note."""
    edit_bytes: int = 8 << 20
    """The largest existing file `write_file` overwrites (its old text goes into the diff)."""
    output_bytes: int = 64 << 10
    """The most command output kept (the tail), locally and as the terminal's byte limit."""
    mcp_result_bytes: int = 1 << 20
    """The most bytes of one MCP tool result kept (its content, then its structured
    content); the rest is left out with a note."""
    default_timeout_ms: int = 120_000
    kill_grace_s: float = 2.0
    """How long to collect the last output of a command after killing it."""
    cleanup_timeout_s: float = 5.0
    """How long a shielded `terminal/release` may take before it is abandoned."""


@dataclass(frozen=True)
class KeptFromTools:
    """What no tool may reach, handed down by the server (SPEC 4.4: a key never appears in a log
    or on the wire), so the agent never asks the providers where their secrets are."""

    credentials: Path | None = None
    """The stored credentials' directory (resolved): the file tools neither enter nor read it,
    whatever the session's directories are. None: nothing is kept out."""
    variables: frozenset[str] = frozenset()
    """Environment variables the programs `run_command` starts do not inherit (every
    provider's key variable, the key's descriptor)."""
    held: HeldSecrets | None = None
    """Every other key a command could still print (the stored ones, any left in the server's
    environment): scrubbed from each tool result with the provider's own. None: only that."""


@dataclass
class ToolContext:
    """What the tools of one session act on. `allowed_always` is shared with the session and
    grows when the user answers `allow_always`."""

    session_id: str
    cwd: Path
    additional_directories: list[Path]
    client: ClientPort
    allowed_always: set[str] = field(default_factory=set)
    limits: ToolLimits = field(default_factory=ToolLimits)
    subagents: SubagentRunner | None = None
    """Set by a turn that can run subagents; None where `task` is not available."""
    mode: Callable[[], str] = lambda: DEFAULT_MODE
    """The session's mode now (SPEC 4.4): read at each permission decision, so a mode set
    while a turn runs holds for its next tool call."""
    history: Callable[[], Iterable[SessionEvent]] | None = None
    """The session's events so far, for `search_history`; None where there are none."""
    whole: Callable[[], Awaitable[None]] | None = None
    """Makes `history` the whole session's: one loaded for a tail holds only its newest turns
    until this reads the rest from the store (None: it is whole already)."""
    kept: KeptFromTools = KeptFromTools()
    """What the tools must not reach (the server's `kept_from_tools()`)."""
    on_permission: PermissionListener | None = None
    """Set by a turn: told the answer to each permission request, once it is known."""

    def __post_init__(self) -> None:
        # Relative roots would make confinement depend on the server's own working directory.
        for root in (self.cwd, *self.additional_directories):
            if not root.is_absolute():
                raise ValueError(f"session directories must be absolute, got {root}")

    @property
    def directories(self) -> Directories:
        """The session's directories as the confinement checks take them."""
        return Directories(self.cwd, self.additional_directories, self.kept.credentials)


@dataclass(frozen=True)
class FileChange:
    """A file a tool call changed (for its checkpoint): its path as shown (absolute), its bytes
    before (None: it did not exist) and after."""

    path: str
    before: bytes | None
    after: bytes


@dataclass
class ToolOutcome:
    """What a tool call produced: the `tool/result` content, and a plan for `todo_write`."""

    content: list[ToolResultContent]
    is_error: bool
    raw_output: Any = UNSET
    """JSON-able output for `rawOutput`, or `UNSET` to omit it."""
    plan: list[PlanEntry] | None = None
    locations: list[ToolCallLocation] | None = None
    """The places the call touched, when it knows more than its arguments say (absolute paths,
    lines): they replace the `tool_call`'s locations."""
    changes: list[FileChange] | None = None
    """The files the call changed, kept as checkpoints for `/rewind`."""


@dataclass(frozen=True)
class ToolCallInfo:
    """The call being run, as the permission request presents it."""

    call_id: str
    name: str
    arguments: str
    title: str
    kind: str


class ToolError(Exception):
    """A tool call failed in a way the model should read about (an error `tool/result`)."""


def error_outcome(message: str, raw_output: Any = UNSET) -> ToolOutcome:
    return ToolOutcome([TextContent(message)], True, raw_output)


def invalid_arguments(name: str, exc: msgspec.DecodeError) -> ToolOutcome:
    """The error outcome for arguments that are not valid JSON or do not fit the tool.

    msgspec's validation messages name the offending field (`- at $.line`), which is exactly
    what the model needs to correct its call.
    """
    if isinstance(exc, msgspec.ValidationError):
        return error_outcome(f"invalid arguments for {name}: {exc}")
    return error_outcome(f"invalid arguments for {name}: not valid JSON ({exc})")


def decode_client_result(method: str, result: Any, result_type: type[T]) -> T:
    """The client's `result` for `method` as `result_type`, or `ToolError` when it does not fit.

    Unknown keys are tolerated (the result types do not forbid them): the client may add
    `_meta` or fields from a newer protocol version.
    """
    try:
        return msgspec.convert(result, result_type)
    except msgspec.ValidationError as exc:
        raise ToolError(f"the client sent a malformed {method} result: {exc}") from None
