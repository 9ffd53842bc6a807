"""Draft fixtures: a scenario's model calls written as prose, turned into streamed chunks.

    python -m acp_server.testing.draft DRAFT.json SCENARIO_DIR

DRAFT.json describes the model calls in the order the server will make them:

    {"calls": [
        {"reasoning": "...", "text": "...", "usage": [412, 58],
         "tools": [{"id": "call_1", "name": "read_file", "arguments": {"path": "app.py"}}]},
        {"text": "Done.", "finish": "stop"},
        {"text": "Partial answer", "throw": {"message": "upstream overloaded", "code": 529}},
        {"text": "Thinking...", "hang": {"readyFile": "ready.txt"}},
        {"text": "Your name is {{fromRequest:my name is (\\w+)}}.", "patch": true}],
     "children": [[{"text": "the subagent's answer"}]]}

Each call streams its reasoning, text and tool calls as blocks, in that order, each cut into
token-like fragments; `finish` defaults to `tool-calls` when the call has tools, else `stop`.
A `throw` or `hang` call streams its prefix and no finish; it becomes a patch in
`replay.override.json` (so does any call marked `patch`, which is how a `{{fromRequest}}`
placeholder survives a refresh: the log keeps the filled text, the override the placeholder).
`children` are the subagents' calls, written as `session.1.jsonl`, `session.2.jsonl`, ...

The files written are drafts: only the chunks (and each call's `step/start`). Running the
scenario with `ACP_SNAPSHOT=refresh` replays them through the real server and replaces them
with the re-persisted log, which is the fixture and the expected log at once.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType

from ..core.events import AssistantChunk, AssistantChunkData, SessionEvent, StepData, StepStart
from ..core.header import SESSION_FORMAT_VERSION, SessionHeader
from ..core.replay_script import PLACEHOLDER, render_fixture
from ..core.stream import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)


class _Draft(Struct, forbid_unknown_fields=True, rename="camel"):
    pass


class DraftTool(_Draft):
    name: str
    arguments: Any
    id: str | UnsetType = UNSET


class DraftThrow(_Draft):
    message: str
    code: int | str | UnsetType = UNSET


class DraftHang(_Draft):
    ready_file: str | UnsetType = UNSET


class DraftCall(_Draft):
    reasoning: str = ""
    text: str = ""
    tools: list[DraftTool] = []
    usage: tuple[int, int] | UnsetType = UNSET
    finish: Literal["stop", "tool-calls", "length", "content-filter"] | UnsetType = UNSET
    throw: DraftThrow | UnsetType = UNSET
    hang: DraftHang | UnsetType = UNSET
    patch: bool = False


class DraftFile(_Draft):
    calls: list[DraftCall]
    children: list[list[DraftCall]] = []


_MAX_FRAGMENT: Final = 9


def fragments(text: str, rng: random.Random) -> list[str]:
    """`text` cut into streamed fragments of 1 to 9 characters; a `{{fromRequest:...}}`
    placeholder is never cut (the provider fills whole placeholders only)."""
    pieces: list[str] = []
    position = 0
    for match in [*PLACEHOLDER.finditer(text), None]:
        end = match.start() if match is not None else len(text)
        while position < end:
            size = min(rng.randint(1, _MAX_FRAGMENT), end - position)
            pieces.append(text[position : position + size])
            position += size
        if match is not None:
            pieces.append(match.group(0))
            position = match.end()
    return pieces


def call_chunks(call: DraftCall, rng: random.Random, call_number: int) -> list[StreamChunk]:
    """The chunks one drafted model call streams."""
    chunks: list[StreamChunk] = []
    index = 0
    blocks: tuple[
        tuple[Literal["reasoning", "text"], str, type[ReasoningDelta | TextDelta]], ...
    ] = (
        ("reasoning", call.reasoning, ReasoningDelta),
        ("text", call.text, TextDelta),
    )
    for kind, text, delta in blocks:
        if not text:
            continue
        chunks.append(BlockStart(index, kind))
        chunks.extend(delta(index, piece) for piece in fragments(text, rng))
        chunks.append(BlockEnd(index))
        index += 1
    for number, tool in enumerate(call.tools, start=1):
        call_id = tool.id if isinstance(tool.id, str) else f"call_{call_number}_{number}"
        arguments = (
            tool.arguments
            if isinstance(tool.arguments, str)
            else json.dumps(tool.arguments, ensure_ascii=False)
        )
        chunks.append(BlockStart(index, "tool-call"))
        for k, piece in enumerate(fragments(arguments, rng)):
            chunks.append(
                ToolCallDelta(index, call_id, piece, tool.name)
                if k == 0
                else ToolCallDelta(index, call_id, piece)
            )
        chunks.append(BlockEnd(index))
        index += 1
    if call.throw is not UNSET or call.hang is not UNSET:
        return chunks  # a failed or hanging stream: no usage, no finish
    if call.usage is not UNSET:
        chunks.append(UsageChunk(Usage(*call.usage)))
    finish = call.finish if call.finish is not UNSET else ("tool-calls" if call.tools else "stop")
    chunks.append(Finish(finish))
    return chunks


def _entry(call: DraftCall, chunks: list[StreamChunk]) -> dict[str, Any]:
    value: dict[str, Any] = {"chunks": msgspec.to_builtins(chunks)}
    if call.throw is not UNSET:
        value = {"kind": "throw", **value, "message": call.throw.message}
        if call.throw.code is not UNSET:
            value["code"] = call.throw.code
    elif call.hang is not UNSET:
        value = {"kind": "hang", **value}
        if call.hang.ready_file is not UNSET:
            value["readyFile"] = call.hang.ready_file
    else:
        value = {"kind": "chunks", **value}
    return value


def draft_fixture(
    calls: Sequence[DraftCall], header: SessionHeader, rng: random.Random
) -> tuple[bytes, list[dict[str, Any]]]:
    """The draft fixture of `calls`, and the override patches they need."""
    events: list[SessionEvent] = []
    patches = []
    turn = step = 0
    for number, call in enumerate(calls):
        chunks = call_chunks(call, rng, number + 1)
        events.append(StepStart(len(events), 0, StepData(turn, step)))
        for chunk in chunks:
            events.append(AssistantChunk(len(events), 0, AssistantChunkData(turn, step, chunk)))
        if call.throw is not UNSET or call.hang is not UNSET or call.patch:
            patches.append({"at": number, "entry": _entry(call, chunks)})
        ends_turn = (
            call.throw is not UNSET
            or call.hang is not UNSET
            or type(chunks[-1]) is not Finish
            or chunks[-1].reason != "tool-calls"
        )
        turn, step = (turn + 1, 0) if ends_turn else (turn, step + 1)
    return render_fixture(header, events), patches


def write_draft(draft: DraftFile, directory: Path, seed: int = 7) -> list[Path]:
    """Write the draft fixtures (and override) of `draft` into `directory`."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    header = SessionHeader(
        version=SESSION_FORMAT_VERSION, id="<session-1>", created_at=0, cwd="<workspace>"
    )
    data, patches = draft_fixture(draft.calls, header, rng)
    (directory / "session.jsonl").write_bytes(data)
    written.append(directory / "session.jsonl")
    for number, calls in enumerate(draft.children, start=1):
        child = SessionHeader(
            version=SESSION_FORMAT_VERSION,
            id=f"<session-{number + 1}>",
            created_at=0,
            cwd="<workspace>",
            parent_session="<session-1>",
            origin="subagent",
        )
        data, child_patches = draft_fixture(calls, child, rng)
        if child_patches:
            raise ValueError(
                f"children[{number - 1}]: a subagent's calls cannot be patched (no override for children)"
            )
        path = directory / f"session.{number}.jsonl"
        path.write_bytes(data)
        written.append(path)
    if patches:
        path = directory / "replay.override.json"
        path.write_text(
            json.dumps({"patches": patches}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        sys.stderr.write("usage: python -m acp_server.testing.draft DRAFT.json SCENARIO_DIR\n")
        return 2
    try:
        draft = msgspec.json.decode(Path(args[0]).read_bytes(), type=DraftFile)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        sys.stderr.write(f"{args[0]}: {exc}\n")
        return 2
    for path in write_draft(draft, Path(args[1])):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
