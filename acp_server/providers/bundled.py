"""`llm-replay` as the registry builds it: over `--replay`, or, for a bare server, the demo
recording where the demo's project is and a short explanation of the server everywhere else.

A bare `acp-server serve` has no model. Replaying the demo's recording in any project would
make the agent "fix" a `hello.py` the user never had, so the recording plays only in a directory
that holds the demo's own `hello.py` (as `acp-server demo` sets up), and only while the
conversation follows the recording: a step the client refused ends the turn saying so, and a
prompt past the recording's end is answered with the explanation.

This module imports only the provider seam: `acp_server.providers.replay` (and the fixture
parser behind it) is imported when the recording is first needed, so that a bare server answers
its client before it has paid for them.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final

import anyio

from ..core.content import TextContent
from ..core.messages import AssistantTurn, ModelMessage, ToolTurn
from ..core.stream import AssistantToolCall, BlockEnd, BlockStart, Finish, TextDelta
from .base import BoundSession

if TYPE_CHECKING:
    from ..core.stream import StreamChunk
    from .base import ModelRequest, Provider
    from .replay import ReplayProvider
    from .settings import ProviderSettings

DEMO_PROJECT: Final = {"hello.py": b'print("Helo world")\n'}
"""The project the demo recording works on: a greeting with a typo."""

EXPLANATION: Final = (
    "This is acp-server running without a model, so there is nobody here to answer that.\n\n"
    "- To talk to a model, start it with a live provider: `acp-server serve --provider openai "
    "--model NAME` (the key from `OPENAI_API_KEY`) or `--provider anthropic --model NAME` "
    "(`ANTHROPIC_API_KEY`); `acp-server login` stores a key instead.\n"
    "- To replay a recorded session, start it with `--replay path/to/session.jsonl`.\n"
    "- To watch what it does, run `acp-server demo`: a recorded session that fixes a typo in a "
    "`hello.py`, with streaming, a plan, permissions and tools.\n\n"
    "`acp-server serve --help` lists every option."
)
"""What a bare server answers outside the demo's project."""

_PROBE_BYTES: Final = 4096
"""More than any file of the demo project: a larger file is not the demo's."""


def from_settings(settings: ProviderSettings) -> Provider:
    """The provider `--provider llm-replay` names (`acp_server.providers.registry`)."""
    if settings.replay is None and settings.replay_override is None:
        return BareServerProvider(settings.pace_ms)
    from .replay import ReplayProvider, bundled_demo_fixture

    fixture = settings.replay if settings.replay is not None else bundled_demo_fixture()
    return ReplayProvider.from_path(fixture, settings.replay_override, settings.pace_ms)


class BareServerProvider:
    """What a server with no `--replay` and no live provider answers with (see the module's
    docstring): the demo recording in the demo's project, else `EXPLANATION`."""

    name = "llm-replay"

    def __init__(self, pace_ms: int) -> None:
        self.pace_ms = pace_ms
        self._recording: ReplayProvider | None = None
        self._bound: dict[str, BoundSession] = {}
        self._on_script: dict[str, int | None] = {}
        """Each session's position in the recording (its next model call), or None when it does
        not follow the recording; a session is placed at its first model call."""

    def bind_session(self, session: BoundSession) -> None:
        self._bound[session.session_id] = session
        self._on_script.pop(session.session_id, None)

    def _replay(self) -> ReplayProvider:
        if self._recording is None:
            from .replay import ReplayProvider, bundled_demo_fixture

            self._recording = ReplayProvider.from_path(bundled_demo_fixture(), None, self.pace_ms)
        return self._recording

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        position = await self._position_on_script(request)
        if position is None:
            for chunk in answer(EXPLANATION):
                yield chunk
            return
        refused = refused_step(request.messages)
        if refused is not None:
            self._on_script[request.session_id] = None
            for chunk in answer(refused):
                yield chunk
            return
        self._on_script[request.session_id] = position + 1
        async for chunk in self._replay().stream(request):
            yield chunk

    async def _position_on_script(self, request: ModelRequest) -> int | None:
        """Where `request`'s session stands in the recording; None when it does not follow it
        (another project, a subagent, a refused step, or past the recording's end)."""
        session_id = request.session_id
        if session_id in self._on_script:
            position = self._on_script[session_id]
        else:
            bound = self._bound.get(session_id)
            position = 0 if bound is not None and await _starts_the_demo(bound) else None
            self._on_script[session_id] = position
            if bound is not None and position is not None:
                self._replay().bind_session(bound)
        if position is None:
            return None
        scripts = await self._replay().read()
        if position >= len(scripts.primary.entries):
            self._on_script[session_id] = None
            return None
        return position


async def _starts_the_demo(session: BoundSession) -> bool:
    """Whether `session` is a new top-level session in the demo's project."""
    if session.parent_session_id is not None or session.cwd is None or session.model_calls:
        return False
    return await anyio.to_thread.run_sync(holds_demo_project, session.cwd)


def holds_demo_project(cwd: str) -> bool:
    """Whether `cwd` holds the demo's project as the demo starts it (each file regular and
    exactly as shipped; a link, a FIFO or a device is never read)."""
    for name, content in DEMO_PROJECT.items():
        try:
            fd = os.open(os.path.join(cwd, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES):
                return False
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode) or os.read(fd, _PROBE_BYTES) != content:
                return False
        finally:
            os.close(fd)
    return True


def refused_step(messages: list[ModelMessage]) -> str | None:
    """What to say when a tool call of the last step failed or was refused (the recording
    assumed it succeeded); None when the conversation still follows the recording."""
    results: list[ToolTurn] = []
    for message in reversed(messages):
        if not isinstance(message, ToolTurn):
            break
        results.insert(0, message)
    names = {
        block.id: block.name
        for message in messages
        if isinstance(message, AssistantTurn)
        for block in message.content
        if isinstance(block, AssistantToolCall)
    }
    failed = [
        f"`{names.get(result.call_id, 'a tool')}`: "
        + " ".join(block.text for block in result.content if isinstance(block, TextContent))
        for result in results
        if result.is_error is True
    ]
    if not failed:
        return None
    return (
        f"I stopped here: the last step did not go through ({'; '.join(failed)}). I did not "
        "go on with the recorded demo, so nothing after that step was done."
    )


def answer(text: str) -> list[StreamChunk]:
    """One model answer that says `text` and stops."""
    return [
        BlockStart(0, "text"),
        TextDelta(0, text),
        BlockEnd(0),
        Finish("stop"),
    ]


__all__ = ["DEMO_PROJECT", "EXPLANATION", "BareServerProvider", "from_settings"]
