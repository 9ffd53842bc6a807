"""The llm-replay script (SPEC 5), as pure functions: fixture lines in, model-call entries out.

A fixture is a session log, usually in projected form (records without `seq`/`time`, rows
without `seq0`/`time0`). Its `assistant/chunk` events, grouped by `(turn, step)` and split at
each `finish` chunk, are the recorded model calls; the override sidecar replaces or patches
that list. Placeholders `{{fromRequest:<regex>}}` are filled in at stream time from the
request's text. Nothing here reads a file or sleeps: `acp_server.providers.replay` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Final

import msgspec
from msgspec import UNSET, Meta, UnsetType, field

from .chunk_rows import ROW_TYPES, ChunkRowError, decode_storage_record, pack_chunk_runs
from .events import AssistantChunk, EventError, SessionEvent, StepStart
from .header import SessionHeader
from .stream import Finish, ReasoningDelta, StreamChunk, TextDelta
from .structs import Model, Tagged

FIXTURE_NAME: Final = "session.jsonl"
"""A scenario's (or an exported session's) top-level fixture."""
OVERRIDE_NAME: Final = "replay.override.json"
"""The override sidecar beside a fixture."""
CHILD_FIXTURE_NAME: Final = re.compile(r"session\.([1-9][0-9]*)\.jsonl")
"""A subagent's fixture: `session.N.jsonl`, N counting the children from 1."""


def child_fixture_name(number: int) -> str:
    return f"session.{number}.jsonl"


class ReplayError(Exception):
    """A fixture, override or script cannot be used; the message says exactly where and why."""


# ---------------------------------------------------------------------------------------------
# Script entries (also the override sidecar's vocabulary).


class ChunksEntry(Tagged, tag="chunks", tag_field="kind"):
    """A model call that streams `chunks` and completes."""

    chunks: list[StreamChunk]


class ThrowEntry(Tagged, tag="throw", tag_field="kind"):
    """A model call that streams its prefix `chunks`, then fails with `message`."""

    chunks: list[StreamChunk]
    message: str
    code: int | str | UnsetType = UNSET


class HangEntry(Tagged, tag="hang", tag_field="kind"):
    """A model call that streams its prefix, writes `readyFile` if named, then waits to be
    cancelled. A relative `readyFile` is resolved against the session's `cwd`."""

    chunks: list[StreamChunk] = field(default_factory=list)
    ready_file: str | UnsetType = UNSET


ScriptEntry = ChunksEntry | ThrowEntry | HangEntry


class Patch(Model):
    at: Annotated[int, Meta(ge=0)]
    entry: ScriptEntry


class PatchSet(Model):
    patches: list[Patch]


Override = list[ScriptEntry] | PatchSet
"""The sidecar: a bare array replaces the script; `{patches: [...]}` edits it."""


class Underivable(msgspec.Struct, frozen=True):
    """A recorded group without `finish`: a failed stream that an override must describe."""

    turn: int
    step: int


# ---------------------------------------------------------------------------------------------
# Fixtures.

_json: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


class Fixture(msgspec.Struct):
    header: SessionHeader
    events: list[SessionEvent]
    projected: bool


def parse_fixture(name: str, lines: Sequence[bytes]) -> Fixture:
    """Decode a fixture's lines (header first), restoring seqs and times of a projected one.

    A projected record gets the next seq and time 0 (a row keeps its `dt`). A file holds
    projected records or complete ones, never both.
    """
    numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        raise ReplayError(f"{name}: the fixture is empty")
    try:
        header = msgspec.convert(_json.decode(numbered[0][1]), SessionHeader)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ReplayError(f"{name}: line {numbered[0][0]}: not a session header: {exc}") from None
    events: list[SessionEvent] = []
    projected: bool | None = None
    for number, raw in numbered[1:]:
        where = f"{name}: line {number}"
        try:
            value = _json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ReplayError(f"{where}: invalid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ReplayError(f"{where}: a record must be a JSON object")
        is_row = value.get("type") in ROW_TYPES
        seq_key, time_key = ("seq0", "time0") if is_row else ("seq", "time")
        this_projected = seq_key not in value
        if projected is None:
            projected = this_projected
        elif projected != this_projected:
            raise ReplayError(f"{where}: projected and complete records are mixed in one file")
        if this_projected:
            if time_key in value:
                raise ReplayError(
                    f"{where}: a projected record has {time_key!r} but no {seq_key!r}"
                )
            value = {"type": value.get("type"), seq_key: len(events), time_key: 0, **value}
        try:
            batch = decode_storage_record(value)
        except (ChunkRowError, EventError) as exc:
            raise ReplayError(f"{where}: {exc}") from None
        if batch[0].seq != len(events):
            raise ReplayError(f"{where}: seq gap: expected seq {len(events)}, found {batch[0].seq}")
        events.extend(batch)
    return Fixture(header, events, bool(projected))


def render_fixture(header: SessionHeader, events: Iterable[SessionEvent]) -> bytes:
    """A log as a fixture: canonical packing, projected form (no seqs, times or `seq0`/`time0`;
    rows keep their `dt`), one record a line after the header. `parse_fixture` reads it back
    to the same events, with every time relative to 0."""
    lines = [_encoder.encode(header)]
    for record in pack_chunk_runs(events):
        value = msgspec.to_builtins(record)
        for key in ("seq", "time", "seq0", "time0"):
            value.pop(key, None)
        lines.append(_encoder.encode(value))
    return b"\n".join(lines) + b"\n"


def derive_script(events: Iterable[SessionEvent]) -> list[ChunksEntry | Underivable]:
    """One entry per recorded model call: chunks grouped by `(turn, step)`, split at `finish`.

    Groups keep the order in which they first appear. Chunks after a step's last `finish` (or
    a step with no `finish` at all) are a failed stream, returned as `Underivable`; so is a
    `step/start` with no chunks (a model request that failed before streaming), so that the
    script's entries line up with the log's steps, which is how a loaded session resumes.
    """
    groups: dict[tuple[int, int], list[list[StreamChunk]]] = {}
    for event in events:
        if type(event) is StepStart:
            groups.setdefault((event.data.turn, event.data.step), [[]])
            continue
        if type(event) is not AssistantChunk:
            continue
        d = event.data
        calls = groups.setdefault((d.turn, d.step), [[]])
        calls[-1].append(d.chunk)
        if type(d.chunk) is Finish:
            calls.append([])
    script: list[ChunksEntry | Underivable] = []
    for (turn, step), calls in groups.items():
        for i, chunks in enumerate(calls):
            if not chunks and (i > 0 or len(calls) > 1):
                continue  # nothing after the last finish
            if chunks and type(chunks[-1]) is Finish:
                script.append(ChunksEntry(chunks))
            else:
                script.append(Underivable(turn, step))
    return script


def parse_override(name: str, raw: bytes) -> Override:
    """Decode and validate an override sidecar; every entry and chunk is checked here."""
    try:
        override = msgspec.json.decode(raw, type=Override)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ReplayError(f"{name}: {exc}") from None
    if isinstance(override, PatchSet):
        seen: set[int] = set()
        for i, patch in enumerate(override.patches):
            if patch.at in seen:
                raise ReplayError(f"{name}: patches[{i}].at: index {patch.at} is patched twice")
            seen.add(patch.at)
    return override


def apply_override(
    name: str, derived: list[ChunksEntry | Underivable], override: Override | None
) -> list[ScriptEntry]:
    """The final script: the derived one, replaced or patched; no `Underivable` may remain."""
    if isinstance(override, list):
        return list(override)
    script: list[ScriptEntry | Underivable] = list(derived)
    if override is not None:
        for patch in sorted(override.patches, key=lambda p: p.at):
            if patch.at < len(script):
                script[patch.at] = patch.entry
            elif patch.at == len(script):
                script.append(patch.entry)
            else:
                raise ReplayError(
                    f"{name}: a patch at {patch.at} is past the end of the script "
                    f"({len(script)} entries; `at` equal to the length appends)"
                )
    final: list[ScriptEntry] = []
    for index, entry in enumerate(script):
        if isinstance(entry, Underivable):
            raise ReplayError(
                f"{name}: script entry {index} (turn {entry.turn}, step {entry.step}) has no finish chunk: "
                "it is a failed stream, so the scenario must say what happened in an override "
                "(a `throw` or `hang` entry patched at that index)"
            )
        final.append(entry)
    return final


# ---------------------------------------------------------------------------------------------
# Placeholders.

PLACEHOLDER: Final = re.compile(r"\{\{fromRequest:(.+?)\}\}")
_MARK: Final = "{{fromRequest:"
_MARK_BYTES: Final = _MARK.encode()


def chunks_have_placeholders(chunks: Sequence[StreamChunk]) -> bool:
    """Whether any of `chunks` may hold a placeholder; when not, `fill_placeholders` would give
    each chunk back unchanged. (The JSON of the list holds the JSON of each chunk.)"""
    return _MARK_BYTES in _encoder.encode(chunks)


def fill_placeholders(chunk: StreamChunk, request_text: str) -> StreamChunk:
    """`chunk` with each `{{fromRequest:<regex>}}` in its strings replaced by the regex's last
    match in `request_text` (its first group, if it has one). No match is a `ReplayError`."""
    if (type(chunk) is TextDelta or type(chunk) is ReasoningDelta) and _MARK not in chunk.text:
        return chunk  # the common case, without encoding the chunk
    raw = msgspec.json.encode(chunk)
    if _MARK_BYTES not in raw:
        return chunk
    value = msgspec.to_builtins(chunk)
    filled = {k: _fill(v, request_text) if isinstance(v, str) else v for k, v in value.items()}
    filled_chunk: StreamChunk = msgspec.convert(filled, StreamChunk)
    return filled_chunk


def _fill(text: str, request_text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        pattern = match.group(1)
        try:
            found = list(re.finditer(pattern, request_text))
        except re.error as exc:
            raise ReplayError(f"{{{{fromRequest:{pattern}}}}}: invalid regex: {exc}") from None
        if not found:
            raise ReplayError(f"{{{{fromRequest:{pattern}}}}} found no match in the request")
        last = found[-1]
        return last.group(1) if last.re.groups else last.group(0)

    return PLACEHOLDER.sub(replace, text)


def count_model_calls(events: Iterable[SessionEvent]) -> int:
    """How many model calls a log already holds: its `step/start` events (one call a step)."""
    return sum(1 for e in events if type(e) is StepStart)


__all__ = [
    "ChunksEntry",
    "Fixture",
    "HangEntry",
    "Override",
    "Patch",
    "PatchSet",
    "ReplayError",
    "ScriptEntry",
    "ThrowEntry",
    "Underivable",
    "apply_override",
    "chunks_have_placeholders",
    "count_model_calls",
    "derive_script",
    "fill_placeholders",
    "parse_fixture",
    "parse_override",
    "render_fixture",
]
