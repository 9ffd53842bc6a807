"""JSON Schemas of the session files and the history API, generated from the msgspec types (SPEC 7).

    python -m acp_server.schemas [--check] [--out DIR]

writes one JSON Schema (draft 2020-12) per artifact into DIR (default `schemas/`, run from the
repository root); `--check` writes nothing and exits 1 naming every file that is missing or
differs from what the types generate. Output is deterministic: sorted keys, two-space indent,
one trailing newline, so a committed schema can be compared byte for byte.

Everything comes from `msgspec.json.schema_components` over the real types. Four things msgspec
cannot express are added here, each from the types' own components and constants:

- `SessionEvent` (and `StorageRecord`) mix the tagged known events with the untagged
  `UnknownEvent`, which msgspec refuses in one union: the union is written as a `oneOf`, and
  `UnknownEvent.type` excludes every known event type and chunk-row tag (an event of a known
  type must be that type's exact shape; only an unknown type may be kept, when ignorable).
- `SessionHistoryRecord = {event} | {chunks}` is written as a `oneOf` of the two record
  structs, which are closed (the client's decoder refuses any other key).
- Structs that hold those unions (`SessionEventParams`, `PageResult`, `FollowResult`, the two
  history records) are schema twins of the real structs: the same fields, names, defaults and
  docstrings, with the union field pointing at the hand-written definition. The generator checks
  that the real field still has the type it replaces, so a changed type cannot go unnoticed.
- The projected fixture record (SPEC 5) is the storage record with `seq`/`time` (rows:
  `seq0`/`time0`) optional.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, get_args

import msgspec
from msgspec import NODEFAULT, Struct

from .core.chunk_rows import ROW_CLASSES, ROW_TYPES, ChunkRow
from .core.events import KNOWN_EVENT_TYPES, KnownEvent, SessionEvent, UnknownEvent
from .core.header import SessionHeader
from .core.history import (
    ChunksRecord,
    EventRecord,
    FollowEndedParams,
    FollowParams,
    FollowResult,
    PageParams,
    PageResult,
    SearchParams,
    SearchResult,
    SessionEventParams,
    UnfollowParams,
)
from .core.replay_script import Override
from .testing.scenario import ScenarioInput

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
REF: Final = "#/$defs/{name}"
DEFAULT_OUT: Final = Path("schemas")


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(name=name)}


# ---------------------------------------------------------------------------------------------
# Twins: the real structs, with a union field msgspec cannot describe pointing at a hand-made
# definition instead.


class _SessionEventRef:
    """Stands for `SessionEvent` in a twin: `{"$ref": "#/$defs/SessionEvent"}`."""


class _HistoryRecordRef:
    """Stands for a `SessionHistoryRecord` in a twin: `{"$ref": "#/$defs/SessionHistoryRecord"}`."""


_REFS: Final[dict[type, str]] = {
    _SessionEventRef: "SessionEvent",
    _HistoryRecordRef: "SessionHistoryRecord",
}


def _schema_hook(kind: type) -> dict[str, Any]:
    if kind in _REFS:
        return ref(_REFS[kind])
    raise NotImplementedError(kind)


def _twin(
    struct: type[Struct],
    replace: dict[str, tuple[Any, Any]],
    *,
    forbid_unknown_fields: bool | None = None,
) -> type[Struct]:
    """A copy of `struct` for schema generation: `replace` maps a field name to (the type the
    real field must have, the type the twin uses). Encoded names, defaults, tag and docstring
    are the real struct's."""
    config = struct.__struct_config__
    fields: list[tuple[Any, ...]] = []
    rename: dict[str, str] = {}
    pending = dict(replace)
    for info in msgspec.structs.fields(struct):
        kind = info.type
        if info.name in pending:
            expected, kind = pending.pop(info.name)
            if info.type != expected:
                raise RuntimeError(
                    f"{struct.__name__}.{info.name} is now {info.type!r}, not {expected!r}: "
                    "update acp_server/schemas.py"
                )
        rename[info.name] = info.encode_name
        if info.default is not NODEFAULT:
            fields.append((info.name, kind, info.default))
        elif info.default_factory is not NODEFAULT:
            fields.append((info.name, kind, msgspec.field(default_factory=info.default_factory)))
        else:
            fields.append((info.name, kind))
    if pending:
        raise RuntimeError(
            f"{struct.__name__} has no field {sorted(pending)}: update acp_server/schemas.py"
        )
    twin = msgspec.defstruct(
        struct.__name__,
        fields,
        kw_only=True,
        rename=rename,
        omit_defaults=config.omit_defaults,
        forbid_unknown_fields=config.forbid_unknown_fields
        if forbid_unknown_fields is None
        else forbid_unknown_fields,
        tag=config.tag,
        tag_field=config.tag_field,
    )
    twin.__doc__ = struct.__doc__
    return twin


def _twins() -> list[type[Struct]]:
    records = (list[Any], list[_HistoryRecordRef])
    return [
        _twin(SessionEventParams, {"event": (SessionEvent, _SessionEventRef)}),
        _twin(PageResult, {"records": records}),
        _twin(FollowResult, {"records": records}),
        # The client's decoder (`expand_history_records`) refuses a record with any other key.
        _twin(EventRecord, {"event": (SessionEvent, _SessionEventRef)}, forbid_unknown_fields=True),
        _twin(ChunksRecord, {}, forbid_unknown_fields=True),
    ]


# ---------------------------------------------------------------------------------------------
# The pool of definitions every schema file draws from.


def _union(title: str, description: str, members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"title": title, "description": description, "oneOf": list(members)}


def _pool() -> dict[str, Any]:
    types: list[Any] = [
        KnownEvent,
        UnknownEvent,
        ChunkRow,
        SessionHeader,
        PageParams,
        FollowParams,
        UnfollowParams,
        FollowEndedParams,
        SearchParams,
        SearchResult,
        Override,
        *_twins(),
    ]
    roots, defs = msgspec.json.schema_components(types, schema_hook=_schema_hook, ref_template=REF)
    known_union, row_union = roots[types.index(KnownEvent)], roots[types.index(ChunkRow)]
    defs["KnownEvent"] = {
        "title": "KnownEvent",
        "description": "An event of a type this build knows (SPEC 1.2), tagged by `type`.",
        **known_union,
    }
    defs["ChunkRow"] = {
        "title": "ChunkRow",
        "description": "A packed run of consecutive delta chunks of one block (SPEC 2.1), tagged by `type`. "
        "Member k is the `assistant/chunk` event with seq `seq0 + k` and time `time0 + dt[0] + ... + dt[k-1]`; "
        "`dt` has one entry fewer than `texts`/`args`.",
        **row_union,
    }
    defs["ReplayOverride"] = {
        "title": "ReplayOverride",
        "description": "The replay.override.json sidecar (SPEC 5): a bare array of entries replaces the "
        "derived script; `{patches: [{at, entry}]}` edits it (`at` equal to the script length appends).",
        **roots[types.index(Override)],
    }
    unknown = defs["UnknownEvent"]
    unknown["properties"]["type"] = {
        "type": "string",
        "not": {"enum": sorted(KNOWN_EVENT_TYPES | ROW_TYPES)},
    }
    defs["SessionEvent"] = _union(
        "SessionEvent",
        "One session event (SPEC 1): a known event type, or an unknown one kept because it says "
        "`ignorable: true`.",
        [ref("KnownEvent"), ref("UnknownEvent")],
    )
    defs["StorageRecord"] = _union(
        "StorageRecord",
        "One body line of a session log (SPEC 2.2): a plain event or a chunk row.",
        [ref("KnownEvent"), ref("ChunkRow"), ref("UnknownEvent")],
    )
    defs["SessionLogRecord"] = _union(
        "SessionLogRecord",
        "Any line of a session.jsonl. Line 1, and only line 1, is the header; every later line is a "
        "storage record (this schema cannot see line numbers: check the header's position yourself).",
        [ref("SessionHeader"), ref("StorageRecord")],
    )
    defs["SessionHistoryRecord"] = _union(
        "SessionHistoryRecord",
        "One record of a `session.page` or `session.follow` result (SPEC 3.1): `{event}` for a plain "
        "event, `{chunks}` for a packed row.",
        [ref("EventRecord"), ref("ChunksRecord")],
    )
    return defs


_ENVELOPES: Final = (*(kind.__name__ for kind in get_args(KnownEvent)), "UnknownEvent")
_ROWS: Final = tuple(kind.__name__ for kind in ROW_CLASSES)


def _projected(defs: dict[str, Any]) -> dict[str, Any]:
    """The definitions with every event's `seq`/`time` and every row's `seq0`/`time0` optional
    (SPEC 5's projected fixture form). A `time` without a `seq` is refused, like the parser does."""
    defs = copy.deepcopy(defs)
    for name, (seq, time) in [
        *((n, ("seq", "time")) for n in _ENVELOPES),
        *((n, ("seq0", "time0")) for n in _ROWS),
    ]:
        definition = defs[name]
        definition["required"] = [key for key in definition["required"] if key not in (seq, time)]
        definition["dependentRequired"] = {time: [seq]}
    return defs


# ---------------------------------------------------------------------------------------------
# The artifacts.


def _notification(method: str, params: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "jsonrpc": {"enum": ["2.0"]},
            "method": {"enum": [method]},
            "params": ref(params),
        },
        "required": ["jsonrpc", "method", "params"],
        "additionalProperties": False,
    }


Artifact = tuple[str, str, str, dict[str, Any]]
"""(file name, title, description, root schema)."""

ARTIFACTS: Final[list[Artifact]] = [
    (
        "session-event.schema.json",
        "SessionEvent",
        "A session event (SPEC 1), as logged and as sent in `session.event`.",
        ref("SessionEvent"),
    ),
    (
        "session-header.schema.json",
        "SessionHeader",
        "Line 1 of a session log (SPEC 2.2): immutable session metadata.",
        ref("SessionHeader"),
    ),
    (
        "chunk-row.schema.json",
        "ChunkRow",
        "A packed chunk row (SPEC 2.1), as stored and as sent in `{chunks}` history records.",
        ref("ChunkRow"),
    ),
    (
        "storage-record.schema.json",
        "StorageRecord",
        "A body line of a session log (lines 2 and on): a plain event or a chunk row.",
        ref("StorageRecord"),
    ),
    (
        "session-log-record.schema.json",
        "SessionLogRecord",
        "Any line of a session.jsonl: the header (line 1 only) or a storage record (every later line).",
        ref("SessionLogRecord"),
    ),
    (
        "fixture-record.schema.json",
        "FixtureRecord",
        (
            "A body line of an llm-replay fixture (SPEC 5), complete or projected: `seq`/`time` (rows: "
            "`seq0`/`time0`) may be omitted. A file holds projected records or complete ones, never both; "
            "line 1 is a session header."
        ),
        ref("StorageRecord"),
    ),
    (
        "session-page.params.schema.json",
        "session.page params",
        "Params of the `session.page` request (SPEC 3.1).",
        ref("PageParams"),
    ),
    (
        "session-page.result.schema.json",
        "session.page result",
        "Result of the `session.page` request (SPEC 3.1).",
        ref("PageResult"),
    ),
    (
        "session-follow.params.schema.json",
        "session.follow params",
        "Params of the `session.follow` request (SPEC 3.2).",
        ref("FollowParams"),
    ),
    (
        "session-follow.result.schema.json",
        "session.follow result",
        "Result of the `session.follow` request (SPEC 3.2): the newest page and the subscription.",
        ref("FollowResult"),
    ),
    (
        "session-unfollow.params.schema.json",
        "session.unfollow params",
        "Params of the `session.unfollow` request (SPEC 3.2).",
        ref("UnfollowParams"),
    ),
    (
        "session-search.params.schema.json",
        "session.search params",
        "Params of the `session.search` request (SPEC 3.5).",
        ref("SearchParams"),
    ),
    (
        "session-search.result.schema.json",
        "session.search result",
        "Result of the `session.search` request (SPEC 3.5): hits newest first.",
        ref("SearchResult"),
    ),
    (
        "session-event.notification.schema.json",
        "session.event notification",
        "One event appended to a followed session (SPEC 3.2): a whole JSON-RPC notification, never packed.",
        _notification("session.event", "SessionEventParams"),
    ),
    (
        "session-follow-ended.notification.schema.json",
        "session.followEnded notification",
        "A subscription ended by the server (SPEC 3.2): a whole JSON-RPC notification.",
        _notification("session.followEnded", "FollowEndedParams"),
    ),
    (
        "replay-override.schema.json",
        "ReplayOverride",
        "The llm-replay override sidecar, replay.override.json (SPEC 5).",
        ref("ReplayOverride"),
    ),
]

SNAPSHOT_INPUT: Final = "snapshot-input.schema.json"


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        target = value.get("$ref")
        if isinstance(target, str) and target.startswith("#/$defs/"):
            yield target.removeprefix("#/$defs/")
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _document(
    title: str, description: str, root: dict[str, Any], defs: dict[str, Any]
) -> dict[str, Any]:
    """A self-contained schema: the root and every definition it reaches."""
    reached: set[str] = set()
    todo = list(_refs(root))
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(_refs(defs[name]))
    document = {"$schema": DIALECT, "title": title, "description": description, **root}
    document["$defs"] = {name: defs[name] for name in sorted(reached)}
    return document


def generate() -> dict[str, dict[str, Any]]:
    """Every schema file, by file name."""
    defs = _pool()
    projected = _projected(defs)
    out: dict[str, dict[str, Any]] = {}
    for name, title, description, root in ARTIFACTS:
        out[name] = _document(
            title, description, root, projected if name == "fixture-record.schema.json" else defs
        )
    # Its own components: its names never rename the others'.
    roots, own = msgspec.json.schema_components([ScenarioInput], ref_template=REF)
    out[SNAPSHOT_INPUT] = _document(
        "SnapshotInput",
        "A snapshot scenario's input.json (SPEC 6): the client's side of a recorded conversation.",
        roots[0],
        own,
    )
    return out


def render(schema: dict[str, Any]) -> bytes:
    """One schema as committed: sorted keys, two-space indent, UTF-8, a trailing newline."""
    return (json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def rendered() -> dict[str, bytes]:
    return {name: render(schema) for name, schema in generate().items()}


def stale(out: Path, files: dict[str, bytes] | None = None) -> list[str]:
    """The schema files under `out` that are missing or differ from what the types generate."""
    files = rendered() if files is None else files
    problems = []
    for name, data in sorted(files.items()):
        path = out / name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.read_bytes() != data:
            problems.append(f"{path}: differs from what the types generate")
    return problems


def main(
    argv: Sequence[str] | None = None, *, write: Callable[[str], Any] = sys.stdout.write
) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m acp_server.schemas",
        description="Write the JSON Schemas generated from the msgspec types (one file per artifact).",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help="output directory (default: schemas)",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file is missing or stale"
    )
    args = parser.parse_args(argv)
    files = rendered()
    if args.check:
        problems = stale(args.out, files)
        for problem in problems:
            write(f"{problem}\n")
        if problems:
            write("regenerate with: python -m acp_server.schemas\n")
            return 1
        write(f"{len(files)} schemas up to date in {args.out}\n")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        path = args.out / name
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
            write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
