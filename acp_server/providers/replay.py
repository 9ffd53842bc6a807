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

from ..core.events import StreamChunk
from ..core.replay_script import (
    CHILD_FIXTURE_NAME,
    FIXTURE_NAME,
    OVERRIDE_NAME,
    HangEntry,
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
from .base import ModelRequest, ProviderError, request_text

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
    script: _Script | None
    position: int
    cwd: Path | None = None


def bundled_demo_fixture() -> Path:
    """The recording served when no `--replay` is given: a short coding conversation."""
    # The package's own directory, not `importlib.resources`: that import (with zipfile and
    # tempfile behind it) was most of what a first session/new waited for.
    return Path(__file__).resolve().parents[1] / "recordings" / "demo" / FIXTURE_NAME


def load_script(fixture: Path, override: Path | None) -> list[ScriptEntry]:
    """The model-call script of one fixture file, with its override applied."""
    parsed = parse_fixture(str(fixture), fixture.read_bytes().splitlines())
    derived = derive_script(parsed.events)
    patch = parse_override(str(override), override.read_bytes()) if override else None
    return apply_override(str(fixture), derived, patch)


@dataclass
class ReplayProvider:
    primary: _Script
    children: list[_Script]
    pace_ms: int = 0
    name: str = "llm-replay"
    _cursors: dict[str, _Cursor] = field(default_factory=dict)
    _unbound_children: list[_Script] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._unbound_children = list(self.children)

    @classmethod
    def from_path(
        cls, path: Path | str, override: Path | str | None = None, pace_ms: int = 0
    ) -> ReplayProvider:
        """Load a fixture: a `session.jsonl` file or a scenario directory holding one.

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
        primary = _Script(
            str(fixture), load_script(fixture, sidecar if sidecar.is_file() else None)
        )
        numbered = sorted(
            (int(m.group(1)), p)
            for p in directory.iterdir()
            if (m := CHILD_FIXTURE_NAME.fullmatch(p.name)) is not None
        )
        children = []
        for expected, (number, child) in enumerate(numbered, start=1):
            if number != expected:
                raise ReplayError(f"{directory}: child fixture session.{expected}.jsonl is missing")
            children.append(_Script(str(child), load_script(child, None)))
        return cls(primary, children, pace_ms)

    def bind_session(
        self,
        session_id: str,
        *,
        parent_session_id: str | None,
        model_calls: int,
        cwd: str | None = None,
    ) -> None:
        if parent_session_id is None:
            self._cursors[session_id] = _Cursor(
                self.primary, model_calls, Path(cwd) if cwd else None
            )
            self.primary.furthest = max(self.primary.furthest, model_calls)
        else:
            # Children are bound to child scripts at their first model call, in that order.
            self._cursors[session_id] = _Cursor(None, model_calls, Path(cwd) if cwd else None)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        cursor = self._cursors.get(request.session_id)
        if cursor is None:
            raise ProviderError(f"llm-replay: session {request.session_id} was never bound")
        if cursor.script is None:
            if not self._unbound_children:
                raise ProviderError(
                    f"llm-replay: subagent session {request.session_id} asked for a model call, "
                    f"but every child fixture ({len(self.children)}) is already bound"
                )
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
