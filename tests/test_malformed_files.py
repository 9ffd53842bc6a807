"""Malformed files: every damaged session log and replay file either loads or fails with a clear
error (SPEC 2.5, 5, 8), never with another exception and never with a traceback.

Session logs are real logs (packed rows, plain events and the short remainders a flush leaves,
plain and Zstandard), damaged by hypothesis: bytes flipped, lines cut, deleted, duplicated,
swapped or replaced by random JSON, numbers changed. Each one is read (`read_log`) and opened for
continuation (`SessionStore.continue_session`): either it works, or a `LogError` says why, a
`CorruptLog` naming its line. `verify_bytes` agrees with the reader: it reports a problem on the
line the reader names, and a log it finds no problem in reads. A handful of such logs go through
the real server's `session/load`: -32010 with `data.line`, or a normal load.

Replay files are fixtures and override sidecars, generated and damaged the same way: each one
loads, or `parse_override` / `parse_fixture` / `ReplayProvider.from_path` raise a `ReplayError`
naming the file. Through the command line, a bad override exits with status 2 and one line on
stderr.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess, assert_jsonrpc_frame
from fixtures_builder import Scenario, Step, ToolUse, args, step_chunks, turn_records, write_fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from surface_values import session_setup

from acp_server.cli.log import verify_bytes
from acp_server.core.events import convert_event
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.replay_script import ReplayError, parse_fixture, parse_override
from acp_server.providers.replay import ReplayProvider
from acp_server.storage.errors import CorruptLog, LogError, UnsupportedVersion
from acp_server.storage.jsonl.lines import Compression, zstd_frame_end
from acp_server.storage.jsonl.log import parse_log, read_log
from acp_server.storage.jsonl.sessions import SessionStore

SESSION_ID = "damaged"
LINE = re.compile(r": line (\d+): ")

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# A real log: two turns with text, reasoning, tool calls and results, written in flush batches.

TURNS = [
    (
        "Fix the greeting.",
        [
            Step(
                reasoning="Look at the file first.",
                text="Reading hello.py.",
                calls=[ToolUse("call_read", "read_file", args(path="hello.py"))],
            ),
            Step(
                text="It says Helo; fixing it.",
                calls=[
                    ToolUse(
                        "call_write",
                        "write_file",
                        args(path="hello.py", content='print("Hello")\n'),
                    )
                ],
            ),
            Step(text="Done: the greeting is fixed.", usage=(120, 30)),
        ],
    ),
    ("Thanks!", [Step(text="You are welcome.")]),
]


def real_events() -> list[Any]:
    events: list[Any] = []
    for turn, (prompt, steps) in enumerate(TURNS):
        offset = len(events)
        for record in turn_records(turn, prompt, steps):
            if "sourceRange" in record:
                record["sourceRange"] = [offset + s for s in record["sourceRange"]]
            events.append(
                convert_event(
                    {**record, "seq": len(events), "time": 1_700_000_000_000 + 7 * len(events)}
                )
            )
    return events


def write_log(root: Path, compression: Compression) -> Path:
    """The log as the loop writes it: batches of 1 to 9 events, each packed on its own."""
    header = SessionHeader(
        version=SESSION_FORMAT_VERSION, id=SESSION_ID, created_at=1_700_000_000_000, cwd="/work"
    )
    writer = SessionStore(root, compression=compression).create(header)
    events = real_events()
    sizes = [1, 5, 9, 2, 7, 3, 4]
    start = 0
    for n in range(len(events)):
        if start >= len(events):
            break
        batch = events[start : start + sizes[n % len(sizes)]]
        writer.append(batch)
        writer.flush()
        start += len(batch)
    writer.close()
    return writer.path


@pytest.fixture(scope="module")
def plain_log(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_log(tmp_path_factory.mktemp("plain"), "none").read_bytes()


@pytest.fixture(scope="module")
def zstd_log(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_log(tmp_path_factory.mktemp("zstd"), "zstd").read_bytes()


def test_the_base_logs_are_sound_and_hold_every_kind_of_line(
    plain_log: bytes, zstd_log: bytes
) -> None:
    kinds = {json.loads(line)["type"] for line in plain_log.splitlines()[1:]}
    assert {
        "text-chunks",
        "reasoning-chunks",
        "tool-call-chunks",
        "assistant/chunk",
        "tool/call",
        "tool/result",
    } <= kinds
    for data, compression in ((plain_log, "none"), (zstd_log, "zstd")):
        report = verify_bytes("base", data, compression)
        assert (report.problems, report.notes) == ([], [])


# ---------------------------------------------------------------------------------------------
# Damage.

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)
EVENT_TYPES = [
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "plan/update",
    "session/title",
    "subagent/start",
    "session",
    "x/unknown",
]
ROW_TYPES = ["text-chunks", "reasoning-chunks", "tool-call-chunks"]
small_ints = st.integers(-3, 80) | st.sampled_from([2**53 - 1, 2**53, -(2**53)])
record_like = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(EVENT_TYPES),
            "seq": small_ints,
            "time": small_ints,
            "data": json_values,
        },
        optional={"ignorable": json_values, "sourceRange": st.lists(small_ints, max_size=3)},
    ),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(ROW_TYPES),
            "seq0": small_ints,
            "time0": small_ints,
            "data": st.fixed_dictionaries(
                {
                    "turn": small_ints,
                    "step": small_ints,
                    "index": small_ints,
                    "dt": st.lists(small_ints, max_size=4),
                },
                optional={
                    "texts": st.lists(st.text(max_size=3) | json_scalars, max_size=4),
                    "args": st.lists(st.text(max_size=3), max_size=4),
                    "id": json_scalars,
                    "name": json_scalars,
                },
            ),
        }
    ),
    json_values,
)


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` (JSON lines) with one to three kinds of damage."""
    lines = data.split(b"\n")[:-1]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["flip", "truncate", "delete", "duplicate", "swap", "replace", "insert", "number"]
            )
        )
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        if kind == "flip" and lines:
            line = bytearray(lines[at])
            if line:
                line[draw(st.integers(0, len(line) - 1))] = draw(st.integers(0, 255))
            lines[at] = bytes(line)
        elif kind == "truncate":
            joined = b"\n".join(lines) + b"\n"
            cut = draw(st.integers(0, len(joined)))
            return joined[:cut]
        elif kind == "delete" and lines:
            del lines[at]
        elif kind == "duplicate" and lines:
            lines.insert(at, lines[at])
        elif kind == "swap" and len(lines) > 1:
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        elif kind in ("replace", "insert"):
            line = json.dumps(draw(record_like)).encode()
            if kind == "replace" and lines:
                lines[at] = line
            else:
                lines.insert(at, line)
        elif kind == "number" and lines:
            numbers = list(re.finditer(rb"-?\d+", lines[at]))
            if numbers:
                match = numbers[draw(st.integers(0, len(numbers) - 1))]
                new = str(draw(small_ints)).encode()
                lines[at] = lines[at][: match.start()] + new + lines[at][match.end() :]
    return b"\n".join(lines) + b"\n"


@st.composite
def damaged_zstd(draw: st.DrawFn, data: bytes) -> bytes:
    """Compressed bytes flipped, cut short or spliced: the frames themselves break."""
    kind = draw(st.sampled_from(["flip", "truncate", "splice"]))
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
        return bytes(out)
    if kind == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]


# ---------------------------------------------------------------------------------------------
# The contract of a damaged log.


def check_clear_failure(exc: LogError, data: bytes, compression: str) -> None:
    if isinstance(exc, CorruptLog):
        match = LINE.search(str(exc))
        assert match is not None and int(match.group(1)) == exc.line, str(exc)
        assert exc.line >= 1 and exc.reason
        if compression == "none":
            assert exc.line <= data.count(b"\n") + 1, (exc.line, str(exc))
    else:
        assert isinstance(exc, UnsupportedVersion), repr(exc)
        assert f"(this build reads version {SESSION_FORMAT_VERSION})" in str(exc)


def check_damaged_log(data: bytes, compression: str) -> None:
    name = "session.jsonl.zst" if compression == "zstd" else "session.jsonl"
    report = verify_bytes(name, data, compression)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / SESSION_ID
        directory.mkdir()
        path = directory / name
        path.write_bytes(data)
        try:
            contents = read_log(path)
        except LogError as exc:
            check_clear_failure(exc, data, compression)
            if isinstance(exc, CorruptLog):
                assert exc.line in {p.line for p in report.problems}, (
                    exc.line,
                    [(p.line, p.message) for p in report.problems],
                )
            read_failed = True
        else:
            assert [e.seq for e in contents.events] == list(range(len(contents.events)))
            read_failed = False
        assert not (read_failed and report.problems == []), (
            "verify found no problem in a log the reader refuses"
        )
        assert path.read_bytes() == data, "reading changed the file"

        try:
            continued = SessionStore(tmp, compression=compression).continue_session(
                SESSION_ID, 1_800_000_000_000
            )
        except LogError as exc:
            check_clear_failure(exc, data, compression)
            # Continuation reads as the reader does; it also wants the header to name the session.
            assert read_failed or (
                isinstance(exc, CorruptLog) and exc.line == 1 and "header id" in exc.reason
            ), str(exc)
            assert path.read_bytes() == data, "a refused continuation changed the file"
        else:
            assert not read_failed, "a log the reader refuses was continued"
            continued.writer.close()
            again = read_log(path)  # what recovery left is a readable log
            assert [e.seq for e in again.events] == list(range(len(again.events)))
            assert not again.torn_tail


def test_damaged_plain_logs_load_or_fail_naming_the_line(plain_log: bytes) -> None:
    @FUZZ
    @given(damaged(plain_log))
    def one(data: bytes) -> None:
        check_damaged_log(data, "none")

    one()


def test_damaged_zstd_logs_load_or_fail_naming_the_line(zstd_log: bytes) -> None:
    @settings(FUZZ, max_examples=100)
    @given(damaged_zstd(zstd_log))
    def one(data: bytes) -> None:
        check_damaged_log(data, "zstd")

    one()


def zstd_frames(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each frame of a sound Zstandard log."""
    frames, offset = [], 0
    while offset < len(data):
        end = zstd_frame_end(memoryview(data), offset)
        assert end is not None
        frames.append((offset, end))
        offset = end
    return frames


def test_a_bit_flip_in_any_frame_but_the_last_never_reads_as_a_shorter_log(zstd_log: bytes) -> None:
    """A torn write can only be the last frame: damage before it must not pass for one (which
    continuation would then truncate away, with every frame after it)."""
    frames = zstd_frames(zstd_log)[:-1]
    whole = len(read_log_bytes(zstd_log, "zstd").events)

    @FUZZ
    def flips(frame: tuple[int, int]) -> st.SearchStrategy[tuple[int, int]]:
        start, end = frame
        header = st.integers(start, min(end - 1, start + 24))  # frame and first block headers
        return st.tuples(header | st.integers(start, end - 1), st.integers(0, 7))

    @given(st.sampled_from(frames).flatmap(flips))
    def one(flip: tuple[int, int]) -> None:
        data = bytearray(zstd_log)
        data[flip[0]] ^= 1 << flip[1]
        try:
            contents = read_log_bytes(bytes(data), "zstd")
        except LogError:
            return
        assert len(contents.events) == whole and not contents.torn_tail

    one()


def test_a_damaged_frame_before_the_last_is_an_error_not_a_torn_tail(
    zstd_log: bytes, tmp_path: Path
) -> None:
    start, _ = zstd_frames(zstd_log)[1]
    data = bytearray(zstd_log)
    data[start + 4] ^= (
        0b10  # the frame header descriptor: the frame now claims to run past the file
    )
    directory = tmp_path / SESSION_ID
    directory.mkdir()
    path = directory / "session.jsonl.zst"
    path.write_bytes(bytes(data))
    reason = f"frame at byte {start} is incomplete, but complete frames follow it"
    with pytest.raises(CorruptLog) as caught:
        read_log(path)
    assert (caught.value.line, caught.value.reason) == (2, reason)
    with pytest.raises(CorruptLog):
        SessionStore(tmp_path, compression="zstd").continue_session(SESSION_ID, 0)
    assert path.read_bytes() == bytes(data)
    report = verify_bytes(path, bytes(data), "zstd")
    assert [(p.line, p.message) for p in report.problems] == [(2, reason)] and report.notes == []


@pytest.mark.process
def test_paging_a_zstd_log_damaged_before_its_last_frame_is_32010_naming_the_line(
    zstd_log: bytes, tmp_path: Path
) -> None:
    start, _ = zstd_frames(zstd_log)[1]
    data = bytearray(zstd_log)
    data[start + 4] ^= 0b10
    directory = tmp_path / "sessions" / SESSION_ID
    directory.mkdir(parents=True)
    (directory / "session.jsonl.zst").write_bytes(bytes(data))
    detail = f"frame at byte {start} is incomplete, but complete frames follow it"
    with AcpProcess(tmp_path / "sessions") as server:
        error = server.error(
            "session.page",
            {"address": {"kind": "session", "sessionId": SESSION_ID}, "throughSeq": 0},
        )
        assert server.finish() == 0
    assert error == {
        "code": -32010,
        "message": f"Session log unreadable: line 2: {detail}",
        "data": {"reason": "corrupt", "line": 2, "detail": detail},
    }
    assert "Traceback" not in server.stderr


def read_log_bytes(data: bytes, compression: str) -> Any:
    return parse_log(
        "session.jsonl.zst" if compression == "zstd" else "session.jsonl", data, compression
    )


def test_arbitrary_bytes_as_a_log_load_or_fail_naming_the_line() -> None:
    @settings(FUZZ, max_examples=100)
    @given(st.binary(max_size=400), st.sampled_from(["none", "zstd"]))
    def one(data: bytes, compression: str) -> None:
        check_damaged_log(data, compression)

    one()


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        (b"not json", "header is not valid JSON"),
        (b"[1]", 'the first line is not a session header ({"type": "session", ...})'),
        (b'{"type":"session"}', "the header has no version"),
        (
            b'{"type":"session","version":2,"id":5,"createdAt":0,"cwd":"/w"}',
            "invalid header: Expected `str`, got `int` - at `$.id`",
        ),
    ],
)
def test_a_damaged_header_is_line_1(tmp_path: Path, header: bytes, problem: str) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(header + b"\n")
    with pytest.raises(CorruptLog) as caught:
        read_log(path)
    assert (caught.value.line, caught.value.reason.split(":")[0]) == (1, problem.split(":")[0])
    assert str(caught.value).startswith(f"{path}: line 1: {problem}")


# ---------------------------------------------------------------------------------------------
# Damaged logs through the real server.


def damage_examples(plain: bytes) -> dict[str, bytes]:
    lines = plain.split(b"\n")[:-1]
    row = next(i for i, line in enumerate(lines) if b'"text-chunks"' in line)
    return {
        "a flipped byte in a row": b"\n".join(
            [*lines[:row], lines[row].replace(b'"texts"', b'"tExts"'), *lines[row + 1 :]]
        )
        + b"\n",
        "a line cut in the middle": b"\n".join([*lines[:5], lines[5][:20], *lines[6:]]) + b"\n",
        "two lines swapped": b"\n".join([*lines[:3], lines[4], lines[3], *lines[5:]]) + b"\n",
        "a duplicated line": b"\n".join([*lines[:4], lines[3], *lines[4:]]) + b"\n",
        "a deleted line": b"\n".join(lines[:6] + lines[7:]) + b"\n",
        "random JSON": b"\n".join([*lines[:2], b'{"surprise": [1, 2, 3]}', *lines[2:]]) + b"\n",
        "an unknown event type": b"\n".join(
            [*lines, b'{"type":"x/new","seq":9999,"time":0,"data":{}}']
        )
        + b"\n",
        "a torn final line": plain + b'{"type":"turn/start","seq":',
    }


@pytest.fixture(scope="module")
def loaded(
    plain_log: bytes, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[dict[str, Any], bytes, bytes]]]:
    """Each damaged log loaded by one real server: (the response, the file before, after)."""
    root = tmp_path_factory.mktemp("served") / "sessions"
    examples = damage_examples(plain_log)
    ids = {name: f"damaged{n}" for n, name in enumerate(examples)}
    for name, data in examples.items():
        directory = root / ids[name]
        directory.mkdir(parents=True)
        (directory / "session.jsonl").write_bytes(
            data.replace(b'"id":"damaged"', f'"id":"{ids[name]}"'.encode(), 1)
        )
    answers: dict[str, tuple[dict[str, Any], bytes, bytes]] = {}
    with AcpProcess(root) as server:
        server.initialize()
        for name in examples:
            before = (root / ids[name] / "session.jsonl").read_bytes()
            response, _ = server.exchange(
                "session/load", {"sessionId": ids[name], "cwd": "/work", "mcpServers": []}
            )
            answers[name] = (response, before, (root / ids[name] / "session.jsonl").read_bytes())
        assert server.finish() == 0
    for line in server.stdout_lines:
        assert_jsonrpc_frame(line)
    assert "Traceback" not in server.stderr, server.stderr
    yield answers


@pytest.mark.process
@pytest.mark.parametrize(
    ("name", "line", "detail"),
    [
        (
            "a flipped byte in a row",
            14,
            "text-chunks row (seq0=17): Object contains unknown field `tExts` - at `$.data`",
        ),
        ("a line cut in the middle", 6, "invalid JSON: Input data was truncated"),
        ("two lines swapped", 4, "seq gap: expected seq 2, found 3"),
        ("a duplicated line", 5, "seq gap: expected seq 3, found 2"),
        ("a deleted line", 7, "seq gap: expected seq 5, found 6"),
        ("random JSON", 3, "Object missing required field `type`"),
        ("an unknown event type", 70, "unknown event type 'x/new' (not marked ignorable)"),
    ],
)
def test_a_damaged_log_is_32010_naming_the_line_and_left_unchanged(
    loaded: dict[str, tuple[dict[str, Any], bytes, bytes]], name: str, line: int, detail: str
) -> None:
    response, before, after = loaded[name]
    assert response["error"] == {
        "code": -32010,
        "message": f"Session log unreadable: line {line}: {detail}",
        "data": {"reason": "corrupt", "line": line, "detail": detail},
    }
    assert after == before


@pytest.mark.process
def test_a_torn_final_line_loads_and_is_cut_away(
    loaded: dict[str, tuple[dict[str, Any], bytes, bytes]], plain_log: bytes
) -> None:
    response, before, after = loaded["a torn final line"]
    assert response["result"] == session_setup()
    assert after.startswith(before[: before.rindex(b"\n") + 1]) and b'"seq":\n' not in after
    assert verify_bytes("after", after, "none").problems == []


# ---------------------------------------------------------------------------------------------
# Replay files: override sidecars and fixtures.

SCENARIO = Scenario(
    [
        (
            "hello",
            [
                Step(text="Hi there.", calls=[ToolUse("call_1", "todo_write", args(todos=[]))]),
                Step(text="Done."),
            ],
        )
    ]
)
CHUNKS = step_chunks(Step(text="Patched."))
VALID_OVERRIDES: list[Any] = [
    [{"kind": "chunks", "chunks": CHUNKS}],
    {
        "patches": [
            {
                "at": 1,
                "entry": {"kind": "throw", "chunks": CHUNKS[:2], "message": "boom", "code": 500},
            }
        ]
    },
    {"patches": [{"at": 2, "entry": {"kind": "hang", "chunks": CHUNKS[:1], "readyFile": "ready"}}]},
]
ENTRY_KINDS = ["chunks", "throw", "hang", "other"]
CHUNK_TYPES = [
    "block-start",
    "text-delta",
    "reasoning-delta",
    "tool-call-delta",
    "block-end",
    "usage",
    "finish",
    "nope",
]
chunk_like = st.fixed_dictionaries(
    {"type": st.sampled_from(CHUNK_TYPES)},
    optional={
        "index": small_ints | json_scalars,
        "text": json_scalars,
        "blockType": st.sampled_from(["text", "reasoning", "tool-call", "x"]),
        "id": json_scalars,
        "argumentsDelta": json_scalars,
        "reason": st.sampled_from(["stop", "tool-calls", "length", "content-filter", "x"]),
        "usage": json_values,
    },
)
entry_like = st.fixed_dictionaries(
    {"kind": st.sampled_from(ENTRY_KINDS)},
    optional={
        "chunks": st.lists(chunk_like, max_size=4) | json_values,
        "message": json_scalars,
        "code": json_scalars,
        "readyFile": json_scalars,
    },
)
override_like = st.one_of(
    st.lists(entry_like, max_size=3),
    st.fixed_dictionaries(
        {
            "patches": st.lists(
                st.fixed_dictionaries({"at": small_ints | json_scalars, "entry": entry_like}),
                max_size=3,
            )
        }
    ),
    json_values,
)


def mutate_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if not out:
            break
        at = draw(st.integers(0, len(out) - 1))
        kind = draw(st.sampled_from(["flip", "cut", "truncate"]))
        if kind == "flip":
            out[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del out[at : at + draw(st.integers(1, 6))]
        else:
            del out[at:]
    return bytes(out)


@st.composite
def override_files(draw: st.DrawFn) -> bytes:
    choice = draw(st.sampled_from(["generated", "mutated", "bytes"]))
    if choice == "generated":
        return json.dumps(draw(override_like)).encode()
    if choice == "mutated":
        return mutate_bytes(draw, json.dumps(draw(st.sampled_from(VALID_OVERRIDES))).encode())
    return draw(st.binary(max_size=200))


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fixture(tmp_path_factory.mktemp("fixture"), SCENARIO)


def test_the_valid_overrides_load(fixture_dir: Path, tmp_path: Path) -> None:
    for n, override in enumerate(VALID_OVERRIDES):
        sidecar = tmp_path / f"override{n}.json"
        sidecar.write_text(json.dumps(override))
        ReplayProvider.from_path(fixture_dir, sidecar)


def test_fuzzed_override_sidecars_load_or_fail_with_a_replay_error(fixture_dir: Path) -> None:
    @FUZZ
    @given(override_files())
    def one(raw: bytes) -> None:
        try:
            parse_override("replay.override.json", raw)
        except ReplayError as exc:
            assert str(exc).startswith("replay.override.json: ") and len(str(exc)) > len(
                "replay.override.json: "
            )
            assert "\n" not in str(exc)
        with tempfile.TemporaryDirectory() as tmp:
            sidecar = Path(tmp) / "replay.override.json"
            sidecar.write_bytes(raw)
            try:
                ReplayProvider.from_path(fixture_dir, sidecar)
            except ReplayError as exc:
                assert str(exc).startswith(
                    (str(sidecar) + ": ", str(fixture_dir / "session.jsonl") + ": ")
                ), str(exc)

    one()


def test_fuzzed_fixtures_load_or_fail_with_a_replay_error_naming_the_line(
    fixture_dir: Path,
) -> None:
    base = (fixture_dir / "session.jsonl").read_bytes()

    @FUZZ
    @given(st.one_of(damaged(base), st.binary(max_size=200)))
    def one(raw: bytes) -> None:
        try:
            parse_fixture("session.jsonl", raw.splitlines())
        except ReplayError as exc:
            assert str(exc).startswith("session.jsonl: "), str(exc)
            assert re.match(r"session\.jsonl: (line \d+: |the fixture is empty)", str(exc)), str(
                exc
            )
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "session.jsonl").write_bytes(raw)
            try:
                ReplayProvider.from_path(tmp)
            except ReplayError as exc:
                assert str(exc).startswith(str(Path(tmp) / "session.jsonl") + ": "), str(exc)

    one()


def test_a_missing_child_fixture_is_named(fixture_dir: Path, tmp_path: Path) -> None:
    directory = write_fixture(tmp_path / "fixture", SCENARIO)
    (directory / "session.2.jsonl").write_bytes((fixture_dir / "session.jsonl").read_bytes())
    with pytest.raises(ReplayError, match=r": child fixture session\.1\.jsonl is missing$"):
        ReplayProvider.from_path(directory)


BAD_OVERRIDES = {
    "not-json.json": b"{not json",
    "wrong-kind.json": b'[{"kind": "stream", "chunks": []}]',
    "bad-chunk.json": b'[{"kind": "chunks", "chunks": [{"type": "text-delta", "index": "0", "text": "x"}]}]',
    "twice.json": b'{"patches": [{"at": 0, "entry": {"kind": "chunks", "chunks": []}}, {"at": 0, "entry": {"kind": "chunks", "chunks": []}}]}',
    "binary.json": b"\xff\xfe\x00\x01",
}


@pytest.mark.process
@pytest.mark.parametrize("name", [*BAD_OVERRIDES, "missing.json", "a-directory"])
def test_a_bad_override_on_the_command_line_exits_2_with_one_line(
    fixture_dir: Path, tmp_path: Path, name: str
) -> None:
    sidecar = tmp_path / name
    if name in BAD_OVERRIDES:
        sidecar.write_bytes(BAD_OVERRIDES[name])
    elif name == "a-directory":
        sidecar.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "acp_server",
            "serve",
            "--sessions-dir",
            str(tmp_path / "sessions"),
            "--replay",
            str(fixture_dir),
            "--replay-override",
            str(sidecar),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
        check=False,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert done.stdout == b""
    assert stderr.count("\n") == 1 and stderr.startswith("acp-server serve: error: "), stderr
    assert "Traceback" not in stderr
