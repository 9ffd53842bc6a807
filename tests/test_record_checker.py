"""`RecordChecker`, the one check of stored records: each kind of problem, with its exact line
and message, failing fast (what a load does) and collecting (what `log verify` reports)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.storage.errors import CorruptLog
from acp_server.storage.records import Problem, RecordChecker, seq_problem


def event(seq: int, type_: str = "turn/start", **data: Any) -> bytes:
    return json.dumps({"type": type_, "seq": seq, "time": 0, "data": {"turn": 0, **data}}).encode()


def ranged(seq: int, source_range: list[int]) -> bytes:
    text = [{"type": "text", "text": "hi"}]
    value = {
        "type": "assistant/message",
        "seq": seq,
        "time": 0,
        "data": {"turn": 0, "step": 0, "message": {"id": "m", "content": text}},
        "sourceRange": source_range,
    }
    return json.dumps(value).encode()


def tool_call(seq: int, call_id: str) -> bytes:
    data = {"turn": 0, "step": 0, "callId": call_id, "name": "read", "arguments": "{}"}
    return json.dumps({"type": "tool/call", "seq": seq, "time": 0, "data": data}).encode()


def tool_result(seq: int, call_id: str, source_range: list[int]) -> bytes:
    data = {"turn": 0, "step": 0, "callId": call_id, "content": []}
    value = {"type": "tool/result", "seq": seq, "time": 0, "data": data}
    return json.dumps({**value, "sourceRange": source_range}).encode()


def text_row(seq0: int, texts: list[str], dt: list[int] | None = None) -> bytes:
    data = {"turn": 0, "step": 0, "index": 0, "dt": [0] * (len(texts) - 1) if dt is None else dt}
    return json.dumps(
        {"type": "text-chunks", "seq0": seq0, "time0": 0, "data": {**data, "texts": texts}}
    ).encode()


def run(lines: list[bytes], **options: Any) -> RecordChecker:
    """Feed `lines` as lines 2 on (the header being line 1)."""
    check = RecordChecker("log", **options)
    for number, raw in enumerate(lines, start=2):
        check.line(number, raw)
    return check


# Each kind of problem: its lines, then where and what the checker reports.
PROBLEMS: list[tuple[str, list[bytes], int, str]] = [
    ("gap", [event(0), event(2)], 3, "seq gap: expected seq 1, found 2"),
    ("first seq", [event(1)], 2, "seq gap: expected seq 0, found 1"),
    ("row gap", [event(0), text_row(2, ["a", "b"])], 3, "seq gap: expected seq 1, found 2"),
    ("after a row", [text_row(0, ["a", "b"]), event(3)], 3, "seq gap: expected seq 2, found 3"),
    ("not JSON", [b"{"], 2, "invalid JSON: Input data was truncated"),
    (
        "short dt",
        [text_row(0, ["a", "b", "c"], dt=[1])],
        2,
        "text-chunks row (seq0=0): dt has 1 entries, expected 2",
    ),
    (
        "forward range",
        [event(0), ranged(1, [1, 1])],
        3,
        "sourceRange [1, 1] must name earlier seqs in order",
    ),
    (
        "message range",
        [event(0), event(1), ranged(2, [0, 0])],
        4,
        "sourceRange [0, 0] of an assistant/message must end just before it",
    ),
    (
        "no tool call",
        [event(0), tool_result(1, "c", [0, 0])],
        3,
        "sourceRange [0, 0] of a tool/result must be [s, s] with s a tool/call",
    ),
    (
        "other call",
        [tool_call(0, "a"), tool_result(1, "b", [0, 0])],
        3,
        "tool/result for 'b' points at the tool/call of 'a'",
    ),
]


@pytest.mark.parametrize(
    ("lines", "line", "message"), [p[1:] for p in PROBLEMS], ids=[p[0] for p in PROBLEMS]
)
def test_failing_fast_raises_the_first_problem_with_its_line(
    lines: list[bytes], line: int, message: str
) -> None:
    with pytest.raises(CorruptLog) as caught:
        run(lines)
    assert (caught.value.path, caught.value.line, caught.value.reason) == ("log", line, message)
    assert str(caught.value) == f"log: line {line}: {message}"


@pytest.mark.parametrize(
    ("lines", "line", "message"), [p[1:] for p in PROBLEMS], ids=[p[0] for p in PROBLEMS]
)
def test_collecting_keeps_the_same_problem(lines: list[bytes], line: int, message: str) -> None:
    assert run(lines, collect=True).problems == [Problem(line, message)]


def test_a_load_calls_an_overlap_a_gap_where_verify_tells_it_apart() -> None:
    lines = [event(0), event(1), event(1)]
    with pytest.raises(CorruptLog, match="line 4: seq gap: expected seq 2, found 1"):
        run(lines)
    assert run(lines, collect=True).problems == [Problem(4, "seq overlap: expected seq 2, found 1")]


def test_collecting_goes_on_after_every_problem_and_resynchronizes_after_a_bad_line() -> None:
    lines = [event(0), b"junk", event(7), event(9), ranged(10, [12, 12]), event(11)]
    check = run(lines, collect=True)
    assert [problem.line for problem in check.problems] == [3, 5, 6]
    assert check.problems[1:] == [
        Problem(5, "seq gap: expected seq 8, found 9"),
        Problem(6, "sourceRange [12, 12] must name earlier seqs in order"),
    ]
    assert check.expected == 12


def test_a_bad_row_is_unreadable_and_the_chain_starts_again_after_it() -> None:
    lines = [event(0), text_row(1, ["a", "b"], dt=[]), event(5), event(6)]
    check = run(lines, collect=True)
    assert check.problems == [Problem(3, "text-chunks row (seq0=1): dt has 0 entries, expected 1")]
    assert check.expected == 7


def test_without_calls_a_tool_result_is_checked_for_its_shape_only() -> None:
    lines = [event(5), tool_result(6, "c", [5, 5]), tool_result(7, "c", [5, 6])]
    check = run(lines, expected=None, calls=False, collect=True)
    assert check.problems == [
        Problem(4, "sourceRange [5, 6] of a tool/result must be [s, s] with s a tool/call")
    ]


def test_where_maps_a_position_to_its_line_only_for_an_error() -> None:
    asked: list[int] = []

    def where(position: int) -> int:
        asked.append(position)
        return 100 + position

    check = RecordChecker("db session s", where=where)
    check.line(0, event(0))
    check.line(1, event(1))
    with pytest.raises(CorruptLog, match=r"^db session s: line 102: seq gap"):
        check.line(2, event(5))
    assert asked == [2]


def test_start_and_expected_follow_each_record() -> None:
    check = RecordChecker("log")
    check.line(2, event(0))
    assert (check.start, check.expected) == (0, 1)
    check.line(3, text_row(1, ["a", "b", "c"]))
    assert (check.start, check.expected) == (1, 4)


@given(st.lists(st.integers(min_value=1, max_value=4), max_size=30), st.data())
def test_a_chain_of_rows_and_events_passes_and_any_shift_is_the_one_gap_reported(
    sizes: list[int], data: st.DataObject
) -> None:
    lines, seq = [], 0
    for size in sizes:
        lines.append(event(seq) if size == 1 else text_row(seq, ["x"] * size))
        seq += size
    check = run(lines)
    assert (check.problems, check.expected) == ([], seq)
    if not lines:
        return
    k = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    shift = data.draw(st.integers(min_value=1, max_value=3))
    start = sum(sizes[:k])
    size = sizes[k]
    moved = event(start + shift) if size == 1 else text_row(start + shift, ["x"] * size)
    found = run([*lines[:k], moved, *lines[k + 1 :]], collect=True).problems
    expected = [Problem(k + 2, seq_problem(start, start + shift))]
    if k + 1 < len(lines):
        after = start + size
        expected.append(Problem(k + 3, seq_problem(after + shift, after, overlap=True)))
    assert found == expected
