"""`llm-replay` (SPEC 5): serves recorded model streams from a fixture, deterministically.

The script logic (fixture parsing, derivation, overrides, placeholders) is pure and lives in
`acp_server.core.replay_script`; this module adds the files, the pacing, the hang and the
per-session cursors.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ..core.replay_script import (
    CHILD_FIXTURE_NAME,
    FIXTURE_NAME,
    OVERRIDE_NAME,
    HangEntry,
    Override,
    ReplayError,
    ScriptEntry,
    ThrowEntry,
    apply_override,
    chunks_have_placeholders,
    derive_script,
    fill_placeholders,
    parse_fixture,
    parse_override,
)
from ..core.stream import StreamChunk
from .base import BoundSession, ModelRequest, ProviderError, request_text

log = logging.getLogger(__name__)


@dataclass
class _Script:
    name: str
    entries: list[ScriptEntry]
    furthest: int = 0
    """The furthest cursor any session reached: the script is consumed when this is its end."""
    _placeholders: dict[int, bool] = field(default_factory=dict, repr=False)

    def has_placeholders(self, index: int) -> bool:
        """Whether entry `index` holds any placeholder (worked out once per entry)."""
        found = self._placeholders.get(index)
        if found is None:
            found = self._placeholders[index] = chunks_have_placeholders(self.entries[index].chunks)
        return found


@dataclass
class _Cursor:
    child: bool
    """A subagent's child session: bound to the next unbound child script at its first call."""
    position: int
    cwd: Path | None = None
    script: _Script | None = None


def bundled_demo_fixture() -> Path:
    """The recording of the demo: a short coding conversation about a greeting's typo."""
    # The package's own directory, not `importlib.resources`: that import (with zipfile and
    # tempfile behind it) was most of what a first session/new waited for.
    return Path(__file__).resolve().parents[1] / "recordings" / "demo" / FIXTURE_NAME


def load_script(fixture: Path, override: Override | None) -> list[ScriptEntry]:
    """The model-call script of one fixture file, with its override applied."""
    parsed = parse_fixture(str(fixture), fixture.read_bytes().splitlines())
    return apply_override(str(fixture), derive_script(parsed.events), override)


@dataclass(frozen=True)
class _Sources:
    """A fixture's files as the provider is made: the recordings found (they are read at the
    first model call), the override, small and written by hand, already read and checked."""

    fixture: Path
    override: Override | None
    children: list[Path]


@dataclass(frozen=True)
class _Scripts:
    primary: _Script
    children: list[_Script]


class ReplayProvider:
    """llm-replay over one fixture, read and parsed at the first model call.

    Its files are found when it is made (a missing fixture, override or child is refused at
    start, as SPEC 8 wants of a path the user gave); parsing a large recording is paid by the
    first prompt that needs it, never by `initialize` or a `session/load` that replays the log.
    """

    name = "llm-replay"

    def __init__(self, sources: _Sources, pace_ms: int = 0) -> None:
        self.pace_ms = pace_ms
        self._sources = sources
        self._scripts: _Scripts | None = None
        self._reading = anyio.Lock()
        self._cursors: dict[str, _Cursor] = {}
        self._unbound_children: list[_Script] = []
        self._bound_furthest = 0
        """The furthest position a top-level session was bound at (a load counts as used)."""

    @classmethod
    def from_path(
        cls, path: Path | str, override: Path | str | None = None, pace_ms: int = 0
    ) -> ReplayProvider:
        """A fixture: a `session.jsonl` file or a scenario directory holding one.

        `replay.override.json` and `session.N.jsonl` children beside it are picked up; an
        explicit `override` path takes the place of the sidecar.
        """
        path = Path(path)
        fixture = path / FIXTURE_NAME if path.is_dir() else path
        if not fixture.is_file():
            raise ReplayError(f"{fixture}: no such fixture")
        directory = fixture.parent
        sidecar = Path(override) if override else directory / OVERRIDE_NAME
        if override and not sidecar.is_file():
            raise ReplayError(f"{sidecar}: no such override file")
        numbered = sorted(
            (int(m.group(1)), p)
            for p in directory.iterdir()
            if (m := CHILD_FIXTURE_NAME.fullmatch(p.name)) is not None
        )
        for expected, (number, _) in enumerate(numbered, start=1):
            if number != expected:
                raise ReplayError(f"{directory}: child fixture session.{expected}.jsonl is missing")
        patch = parse_override(str(sidecar), sidecar.read_bytes()) if sidecar.is_file() else None
        return cls(_Sources(fixture, patch, [child for _, child in numbered]), pace_ms)

    def _loaded(self) -> _Scripts:
        if self._scripts is None:
            sources = self._sources
            primary = _Script(str(sources.fixture), load_script(sources.fixture, sources.override))
            primary.furthest = self._bound_furthest
            children = [_Script(str(child), load_script(child, None)) for child in sources.children]
            self._scripts = _Scripts(primary, children)
            self._unbound_children = list(children)
        return self._scripts

    async def read(self) -> _Scripts:
        """The scripts, read and parsed in a worker thread the first time (a large recording
        takes long enough to hold up every other session's requests on the event loop)."""
        async with self._reading:
            if self._scripts is None:
                try:
                    await anyio.to_thread.run_sync(self._loaded)
                except (ReplayError, OSError) as exc:
                    raise ProviderError(f"llm-replay: {exc}") from None
        return self._loaded()

    @property
    def primary(self) -> _Script:
        """The top-level sessions' script (reading the fixture if it was not yet read)."""
        return self._loaded().primary

    @property
    def children(self) -> list[_Script]:
        """The subagents' scripts, `session.1.jsonl` first."""
        return self._loaded().children

    def bind_session(self, session: BoundSession) -> None:
        cwd = Path(session.cwd) if session.cwd else None
        child = session.parent_session_id is not None
        # Children are bound to child scripts at their first model call, in that order.
        self._cursors[session.session_id] = _Cursor(child, session.model_calls, cwd)
        if not child:
            self._bound_furthest = max(self._bound_furthest, session.model_calls)
            if self._scripts is not None:
                primary = self._scripts.primary
                primary.furthest = max(primary.furthest, session.model_calls)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        cursor = self._cursors.get(request.session_id)
        if cursor is None:
            raise ProviderError(f"llm-replay: session {request.session_id} was never bound")
        if cursor.script is None:
            scripts = await self.read()
            if not cursor.child:
                cursor.script = scripts.primary
            elif not self._unbound_children:
                raise ProviderError(
                    f"llm-replay: subagent session {request.session_id} asked for a model call, "
                    f"but every child fixture ({len(scripts.children)}) is already bound"
                )
            else:
                cursor.script = self._unbound_children.pop(0)
        script = cursor.script
        if cursor.position >= len(script.entries):
            raise ProviderError(
                f"llm-replay: session {request.session_id} asked for script entry {cursor.position}, "
                f"but {script.name} holds only {len(script.entries)} model calls (entries 0 to "
                f"{len(script.entries) - 1}): the script is exhausted"
            )
        index = cursor.position
        entry = script.entries[index]
        cursor.position += 1
        script.furthest = max(script.furthest, cursor.position)
        if self.pace_ms or script.has_placeholders(index):
            text = request_text(request.messages)
            for chunk in entry.chunks:
                if self.pace_ms:
                    await anyio.sleep(self.pace_ms / 1000)
                try:
                    filled = fill_placeholders(chunk, text)
                except ReplayError as exc:
                    raise ProviderError(f"llm-replay: {exc}") from None
                yield filled
        else:
            # No pacing and nothing to fill in: the recorded chunks as they are.
            for chunk in entry.chunks:
                yield chunk
        if isinstance(entry, ThrowEntry):
            raise ProviderError(
                entry.message, entry.code if isinstance(entry.code, (int, str)) else None
            )
        if isinstance(entry, HangEntry):
            if isinstance(entry.ready_file, str):
                ready = Path(entry.ready_file)
                if not ready.is_absolute() and cursor.cwd is not None:
                    ready = cursor.cwd / ready
                await anyio.Path(ready).write_text("ready\n")
            await anyio.sleep_forever()

    def unconsumed(self) -> list[str]:
        """One line for each script that was not fully used."""
        problems = []
        for script in [self.primary, *self.children]:
            if script.furthest < len(script.entries):
                problems.append(
                    f"{script.name}: {len(script.entries) - script.furthest} of "
                    f"{len(script.entries)} model calls were never made"
                )
        return problems

    def assert_consumed(self) -> None:
        """Fail if any script was not fully used."""
        problems = self.unconsumed()
        if problems:
            raise ReplayError("llm-replay: " + "; ".join(problems))
