"""An independent session-log decoder, written from SPEC 2.1 and 2.2 alone.

It imports nothing from `acp_server`: it is a second reading of the contract, so that a test can
tell "the project round-trips its own output" apart from "the project writes what the SPEC says".
It is deliberately strict and deliberately simple: `json` from the standard library (duplicate
keys, `NaN` and non-UTF-8 bytes refused), exact key sets, Python's own integer checks.

- `read_log(path)` gives `(header, events)`: the header dict and every logical event as the plain
  JSON dict it stands for, chunk rows expanded into their member `assistant/chunk` events.
- `read_records(path)` gives `(header, records)`: the checked storage records, rows unexpanded.
- `log_lines(path)` gives the raw lines (a zstd log is decompressed across its frames).

Every violation raises `SpecViolation` naming the 1-based line (the header is line 1).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Final

import zstandard

MAX_SAFE_INTEGER: Final = 2**53 - 1
SESSION_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")

HEADER_REQUIRED: Final = frozenset({"type", "version", "id", "createdAt", "cwd"})
HEADER_OPTIONAL: Final = frozenset(
    {
        "parentSession",
        "origin",
        # Added by the project (acp_server/core/header.py), recorded from `session/new`:
        "additionalDirectories",
        "mcpServers",
    }
)

EVENT_REQUIRED: Final = frozenset({"type", "seq", "time", "data"})
EVENT_OPTIONAL: Final = frozenset({"ignorable", "sourceRange"})

ROW_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})
TEXT_ROW_DATA: Final = frozenset({"turn", "step", "index", "dt", "texts"})
TOOL_ROW_DATA: Final = frozenset({"turn", "step", "index", "dt", "id", "args"})
ROW_CHUNK_TYPES: Final = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}

# SPEC 1.2: the data of each event type, as (required keys, optional keys).
EVENT_DATA: Final[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
    "turn/start": (frozenset({"turn"}), frozenset()),
    "turn/end": (frozenset({"turn", "reason"}), frozenset()),
    "step/start": (frozenset({"turn", "step"}), frozenset()),
    "step/end": (frozenset({"turn", "step"}), frozenset()),
    "user/message": (frozenset({"turn", "message"}), frozenset()),
    "assistant/chunk": (frozenset({"turn", "step", "chunk"}), frozenset()),
    "assistant/message": (
        frozenset({"turn", "step", "message"}),
        frozenset({"usage", "interrupted"}),
    ),
    "tool/call": (frozenset({"turn", "step", "callId", "name", "arguments"}), frozenset()),
    "tool/result": (
        frozenset({"turn", "step", "callId", "content"}),
        frozenset({"isError", "rawOutput"}),
    ),
    "plan/update": (frozenset({"entries"}), frozenset()),
    "session/title": (frozenset({"title"}), frozenset()),
    "subagent/start": (
        frozenset({"turn", "step", "callId", "childSessionId", "mode"}),
        frozenset(),
    ),
    "session/mode": (frozenset({"modeId"}), frozenset()),
    "session/config": (frozenset({"configId", "value"}), frozenset()),
    "command/result": (frozenset({"turn", "command", "content"}), frozenset({"isError"})),
    "session/notice": (frozenset({"severity", "title"}), frozenset({"description"})),
    "session/context": (
        frozenset({"instructions"}),
        frozenset({"systemPromptMode", "systemPrompt"}),
    ),
    "session/forked": (frozenset({"fromSessionId", "throughSeq"}), frozenset()),
}
TURN_END_KINDS: Final = frozenset(
    {"completed", "cancelled", "max-tokens", "refusal", "max-steps", "error", "interrupted"}
)

# SPEC 1.2: StreamChunk, as (required keys, optional keys) per chunk type.
CHUNKS: Final[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
    "block-start": (frozenset({"type", "index", "blockType"}), frozenset()),
    "text-delta": (frozenset({"type", "index", "text"}), frozenset()),
    "reasoning-delta": (frozenset({"type", "index", "text"}), frozenset()),
    "tool-call-delta": (frozenset({"type", "index", "id", "argumentsDelta"}), frozenset({"name"})),
    "block-end": (frozenset({"type", "index"}), frozenset()),
    "usage": (frozenset({"type", "usage"}), frozenset()),
    "finish": (frozenset({"type", "reason"}), frozenset()),
}
FINISH_REASONS: Final = frozenset({"stop", "tool-calls", "length", "content-filter"})


class SpecViolation(ValueError):
    """A log breaks SPEC 2.1 or 2.2; the message names the line."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


# ---------------------------------------------------------------------------------------------
# Bytes to lines.


def zstd_frames(data: bytes) -> list[bytes]:
    """The decompressed content of each frame; each must be complete, checksummed, whole lines.

    A violation names the first line of the offending frame.
    """
    contents: list[bytes] = []
    rest = data
    while rest:
        line = sum(text.count(b"\n") for text in contents) + 1
        frame = zstandard.ZstdDecompressor().decompressobj()
        try:
            checksummed = zstandard.get_frame_parameters(rest).has_checksum
            text = frame.decompress(rest)
        except zstandard.ZstdError as exc:
            raise SpecViolation(line, f"not a valid Zstandard frame: {exc}") from None
        _require(line, checksummed, "a Zstandard frame without a checksum")
        _require(line, frame.eof, "an incomplete Zstandard frame")
        _require(line, not text or text.endswith(b"\n"), "a Zstandard frame ending inside a line")
        contents.append(text)
        rest = frame.unused_data
    return contents


def log_text(path: Path | str) -> bytes:
    """The JSONL text of a log: the file itself, or a `.zst` file decompressed across frames."""
    data = Path(path).read_bytes()
    if not str(path).endswith(".zst"):
        return data
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    text = reader.read()
    if b"".join(zstd_frames(data)) != text:
        raise SpecViolation(1, "the frames do not decompress to the stream's content")
    return text


def log_lines(path: Path | str) -> list[bytes]:
    """The lines of a log, without their `\\n`; the last line must be complete."""
    text = log_text(path)
    if not text.endswith(b"\n"):
        raise SpecViolation(text.count(b"\n") + 1, "the last line has no newline")
    return text.split(b"\n")[:-1]


# ---------------------------------------------------------------------------------------------
# Values.


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError(f"duplicate key in {[k for k, _ in pairs]}")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(line: int, raw: bytes) -> Any:
    try:
        return json.loads(
            raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant
        )
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise SpecViolation(line, f"not a JSON value: {exc}") from None


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_safe(value: Any) -> bool:
    return _is_int(value) and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def _is_seq(value: Any) -> bool:
    return _is_safe(value) and value >= 0


def _keys(
    line: int, what: str, value: Any, required: frozenset[str], optional: frozenset[str]
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecViolation(line, f"{what} is not an object")
    missing = required - value.keys()
    extra = value.keys() - required - optional
    if missing or extra:
        raise SpecViolation(
            line, f"{what}: missing keys {sorted(missing)}, unknown keys {sorted(extra)}"
        )
    return value


def _require(line: int, ok: bool, reason: str) -> None:
    if not ok:
        raise SpecViolation(line, reason)


# ---------------------------------------------------------------------------------------------
# Records.


def check_header(raw: bytes) -> dict[str, Any]:
    """Line 1: `{type: "session", version, id, createdAt, cwd, parentSession?, origin?}`."""
    header = _keys(1, "header", parse_json(1, raw), HEADER_REQUIRED, HEADER_OPTIONAL)
    _require(1, header["type"] == "session", 'header type is not "session"')
    _require(1, _is_int(header["version"]), "header version is not an integer")
    _require(
        1,
        isinstance(header["id"], str) and SESSION_ID.fullmatch(header["id"]) is not None,
        "header id is not a valid session id",
    )
    _require(1, _is_safe(header["createdAt"]), "createdAt is not a safe integer")
    _require(1, isinstance(header["cwd"], str), "cwd is not a string")
    if "parentSession" in header:
        _require(1, isinstance(header["parentSession"], str), "parentSession is not a string")
    if "origin" in header:
        _require(1, header["origin"] == "subagent", 'origin is not "subagent"')
    if "additionalDirectories" in header:
        dirs = header["additionalDirectories"]
        _require(
            1,
            isinstance(dirs, list) and all(isinstance(d, str) for d in dirs),
            "additionalDirectories is not a list of strings",
        )
    if "mcpServers" in header:
        _require(1, isinstance(header["mcpServers"], list), "mcpServers is not a list")
    return header


def _check_chunk(line: int, chunk: Any) -> None:
    _require(line, isinstance(chunk, dict) and chunk.get("type") in CHUNKS, "unknown chunk type")
    required, optional = CHUNKS[chunk["type"]]
    _keys(line, f"{chunk['type']} chunk", chunk, required, optional)
    if "index" in chunk:
        _require(line, _is_int(chunk["index"]), "chunk index is not an integer")
    for key in ("text", "id", "argumentsDelta", "name"):
        if key in chunk:
            _require(line, isinstance(chunk[key], str), f"chunk {key} is not a string")
    if chunk["type"] == "block-start":
        _require(line, chunk["blockType"] in ("text", "reasoning", "tool-call"), "bad blockType")
    if chunk["type"] == "finish":
        _require(line, chunk["reason"] in FINISH_REASONS, "bad finish reason")


def check_event(line: int, event: Any) -> dict[str, Any]:
    """A plain event (SPEC 1.1): the envelope to the letter, and the data keys of SPEC 1.2."""
    _keys(line, "event", event, EVENT_REQUIRED, EVENT_OPTIONAL)
    kind = event["type"]
    _require(line, isinstance(kind, str), "event type is not a string")
    _require(line, kind not in ROW_CHUNK_TYPES, "a row tag used as an event type")
    _require(line, _is_seq(event["seq"]), "seq is not a non-negative safe integer")
    _require(line, _is_safe(event["time"]), "time is not a safe integer")
    if "ignorable" in event:
        _require(line, event["ignorable"] is True, "ignorable is present but not true")
    if "sourceRange" in event:
        source = event["sourceRange"]
        _require(
            line,
            isinstance(source, list)
            and len(source) == 2
            and all(_is_seq(s) for s in source)
            and source[0] <= source[1] < event["seq"],
            "sourceRange is not [first, last] over earlier seqs",
        )
    if kind not in EVENT_DATA:
        _require(line, event.get("ignorable") is True, f"unknown event type {kind!r} not ignorable")
        return event
    required, optional = EVENT_DATA[kind]
    data = _keys(line, f"{kind} data", event["data"], required, optional)
    for key in ("turn", "step"):
        if key in data:
            _require(line, _is_int(data[key]), f"{key} is not an integer")
    if kind == "turn/end":
        reason = data["reason"]
        _require(
            line,
            isinstance(reason, dict) and reason.get("kind") in TURN_END_KINDS,
            "unknown turn/end reason",
        )
        _keys(
            line,
            "turn/end reason",
            reason,
            frozenset({"kind", "error"}) if reason["kind"] == "error" else frozenset({"kind"}),
            frozenset(),
        )
    if kind == "assistant/chunk":
        _check_chunk(line, data["chunk"])
    if kind == "assistant/message" and "interrupted" in data:
        _require(line, data["interrupted"] is True, "interrupted is present but not true")
    if kind == "tool/result" and "isError" in data:
        _require(line, data["isError"] is True, "isError is present but not true")
    if kind == "subagent/start":
        _require(line, data["mode"] == "one-shot", 'mode is not "one-shot"')
    if kind == "session/config":
        _require(line, isinstance(data["value"], (str, bool)), "value is not a string or a boolean")
    if kind == "command/result" and "isError" in data:
        _require(line, data["isError"] is True, "isError is present but not true")
    return event


def check_row(line: int, row: Any) -> dict[str, Any]:
    """A chunk row (SPEC 2.1), every rule of its decoding checked."""
    _keys(line, "row", row, ROW_KEYS, frozenset())
    _require(line, row["type"] in ROW_CHUNK_TYPES, "unknown row type")
    _require(line, _is_seq(row["seq0"]), "seq0 is not a non-negative safe integer")
    _require(line, _is_safe(row["time0"]), "time0 is not a safe integer")
    tool = row["type"] == "tool-call-chunks"
    data = _keys(
        line,
        f"{row['type']} data",
        row["data"],
        TOOL_ROW_DATA if tool else TEXT_ROW_DATA,
        frozenset({"name"}) if tool else frozenset(),
    )
    for key in ("turn", "step", "index"):
        _require(line, _is_int(data[key]), f"{key} is not an integer")
    fragments = data["args" if tool else "texts"]
    _require(
        line,
        isinstance(fragments, list) and len(fragments) > 0,
        "fragments are not a non-empty list",
    )
    _require(line, all(isinstance(f, str) for f in fragments), "a fragment is not a string")
    if tool:
        _require(line, isinstance(data["id"], str), "id is not a string")
        if "name" in data:
            _require(line, isinstance(data["name"], str), "name is not a string")
    dt = data["dt"]
    _require(
        line, isinstance(dt, list) and all(_is_int(d) for d in dt), "dt is not a list of integers"
    )
    _require(
        line,
        len(dt) == len(fragments) - 1,
        f"dt has {len(dt)} entries for {len(fragments)} members",
    )
    _require(line, row["seq0"] + len(fragments) - 1 <= MAX_SAFE_INTEGER, "last seq is not safe")
    time = row["time0"]
    for gap in dt:
        time += gap
        _require(line, _is_safe(time), "a member's time is not a safe integer")
    return row


def is_row(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in ROW_CHUNK_TYPES


def expand_row(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The `assistant/chunk` events a checked row stands for, member by member."""
    data = row["data"]
    tool = row["type"] == "tool-call-chunks"
    fragments = data["args" if tool else "texts"]
    times = [row["time0"]]
    for gap in data["dt"]:
        times.append(times[-1] + gap)
    events = []
    for k, fragment in enumerate(fragments):
        chunk: dict[str, Any] = {"type": ROW_CHUNK_TYPES[row["type"]], "index": data["index"]}
        if tool:
            chunk["id"] = data["id"]
            chunk["argumentsDelta"] = fragment
            if "name" in data:
                chunk["name"] = data["name"]
        else:
            chunk["text"] = fragment
        events.append(
            {
                "type": "assistant/chunk",
                "seq": row["seq0"] + k,
                "time": times[k],
                "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk},
            }
        )
    return events


def check_record(line: int, raw: bytes) -> dict[str, Any]:
    """One body line: a chunk row if its type is a row tag, else a plain event."""
    value = parse_json(line, raw)
    return check_row(line, value) if is_row(value) else check_event(line, value)


def record_events(record: dict[str, Any]) -> list[dict[str, Any]]:
    return expand_row(record) if is_row(record) else [record]


# ---------------------------------------------------------------------------------------------
# Whole logs.


def read_records(path: Path | str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the checked storage records (rows unexpanded); seqs contiguous from 0."""
    lines = log_lines(path)
    if not lines:
        raise SpecViolation(1, "the log is empty")
    header = check_header(lines[0])
    records = []
    expected = 0
    for number, raw in enumerate(lines[1:], start=2):
        record = check_record(number, raw)
        first = record["seq0"] if is_row(record) else record["seq"]
        _require(number, first == expected, f"seq {first} where {expected} was due")
        expected += len(record_events(record))
        records.append(record)
    return header, records


def read_log(path: Path | str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and every logical event, as the plain JSON dicts of SPEC 1."""
    header, records = read_records(path)
    return header, [event for record in records for event in record_events(record)]
