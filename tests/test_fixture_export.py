"""`acp-server fixture export` and the record-mode building blocks, over hand-built session logs.

Subagent logs are found under the same sessions root and numbered in first-call order; ids,
the cwd and times are normalized; failed and cancelled model calls get override entries; stale
fixture files of an earlier export go away.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from acp_server.cli.fixture import (
    ExportError,
    export_fixture,
    finish_recording,
    override_for_fixture,
    record_server_args,
)
from acp_server.core.replay_script import parse_fixture
from acp_server.providers.replay import ReplayProvider

TEXT = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "a"},
    {"type": "text-delta", "index": 0, "text": "b"},
    {"type": "text-delta", "index": 0, "text": "c"},
    {"type": "block-end", "index": 0},
    {"type": "finish", "reason": "stop"},
]


def write_log(
    root: Path,
    session: str,
    cwd: str,
    events: list[dict[str, Any]],
    *,
    parent: str | None = None,
    t0: int = 1_700_000_000_000,
) -> Path:
    header: dict[str, Any] = {
        "type": "session",
        "version": 2,
        "id": session,
        "createdAt": t0,
        "cwd": cwd,
    }
    if parent is not None:
        header |= {"parentSession": parent, "origin": "subagent"}
    lines = [header] + [
        {
            "type": e["type"],
            "seq": i,
            "time": t0 + 10 * i,
            **{k: v for k, v in e.items() if k != "type"},
        }
        for i, e in enumerate(events)
    ]
    (root / session).mkdir(parents=True)
    path = root / session / "session.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def turn(
    n: int,
    prompt: str,
    steps: list[list[dict[str, Any]]],
    end: dict[str, Any] | None = None,
    extra: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "turn/start", "data": {"turn": n}},
        {
            "type": "user/message",
            "data": {
                "turn": n,
                "message": {"id": f"user-{n}", "content": [{"type": "text", "text": prompt}]},
            },
        },
    ]
    for s, chunks in enumerate(steps):
        out.append({"type": "step/start", "data": {"turn": n, "step": s}})
        out += [
            {"type": "assistant/chunk", "data": {"turn": n, "step": s, "chunk": c}} for c in chunks
        ]
        out += (extra or []) if s == 0 else []
        out.append({"type": "step/end", "data": {"turn": n, "step": s}})
    out.append({"type": "turn/end", "data": {"turn": n, "reason": end or {"kind": "completed"}}})
    return out


def subagent(child: str, call_id: str) -> dict[str, Any]:
    return {
        "type": "subagent/start",
        "data": {
            "turn": 0,
            "step": 0,
            "callId": call_id,
            "childSessionId": child,
            "mode": "one-shot",
        },
    }


def fixture_events(path: Path) -> list[dict[str, Any]]:
    parsed = parse_fixture(path.name, path.read_bytes().splitlines())
    return [msgspec.to_builtins(parsed.header), *(msgspec.to_builtins(e) for e in parsed.events)]


def test_children_are_numbered_depth_first_and_every_id_and_path_is_normalized(
    tmp_path: Path,
) -> None:
    root, cwd = tmp_path / "sessions", "/home/me/project"
    top, first, grandchild, second = "a" * 32, "b" * 32, "c" * 32, "d" * 32
    write_log(
        root,
        top,
        cwd,
        turn(0, f"work in {cwd}", [TEXT], extra=[subagent(first, "t1"), subagent(second, "t2")]),
    )
    write_log(
        root, first, cwd, turn(0, "one", [TEXT], extra=[subagent(grandchild, "t3")]), parent=top
    )
    write_log(root, grandchild, cwd, turn(0, "deep", [TEXT]), parent=first)
    write_log(root, second, cwd, turn(0, "two", [TEXT]), parent=top)
    scenario = tmp_path / "scenario"

    export_fixture(root / top, scenario)

    assert sorted(p.name for p in scenario.iterdir()) == [
        "session.1.jsonl",
        "session.2.jsonl",
        "session.3.jsonl",
        "session.jsonl",
    ]
    main = fixture_events(scenario / "session.jsonl")
    assert main[0] == {
        "type": "session",
        "version": 2,
        "id": "<session-1>",
        "createdAt": 0,
        "cwd": "<workspace>",
    }
    assert main[2]["data"]["message"]["content"][0]["text"] == "work in <workspace>"
    assert [e["data"]["childSessionId"] for e in main if e["type"] == "subagent/start"] == [
        "<session-2>",
        "<session-4>",
    ]
    heads = [fixture_events(scenario / f"session.{n}.jsonl")[0] for n in (1, 2, 3)]
    assert [(h["id"], h["parentSession"]) for h in heads] == [
        ("<session-2>", "<session-1>"),
        ("<session-3>", "<session-2>"),
        ("<session-4>", "<session-1>"),
    ]
    assert [
        fixture_events(scenario / f"session.{n}.jsonl")[2]["data"]["message"]["content"][0]["text"]
        for n in (1, 2, 3)
    ] == ["one", "deep", "two"]
    # Canonical packed and projected: the three text deltas are one row, with the real gaps.
    rows = [
        json.loads(line)
        for line in (scenario / "session.jsonl").read_text().splitlines()
        if '"text-chunks"' in line
    ]
    assert rows == [
        {
            "type": "text-chunks",
            "data": {"turn": 0, "step": 0, "index": 0, "dt": [10, 10], "texts": ["a", "b", "c"]},
        }
    ]
    ReplayProvider.from_path(scenario)  # llm-replay takes it


def test_zero_times_keep_cwd_and_stale_files_of_an_earlier_export(tmp_path: Path) -> None:
    root, cwd = tmp_path / "sessions", "/work/here"
    write_log(root, "s1", cwd, turn(0, f"at {cwd}", [TEXT]))
    scenario = tmp_path / "scenario"
    scenario.mkdir()
    for stale in ("session.1.jsonl", "replay.override.json"):
        (scenario / stale).write_text("old\n")
    (scenario / "input.json").write_text("{}\n")

    export_fixture(root / "s1", scenario, zero_times=True, keep_cwd=True)

    assert sorted(p.name for p in scenario.iterdir()) == ["input.json", "session.jsonl"]
    events = fixture_events(scenario / "session.jsonl")
    assert (
        events[0]["cwd"] == cwd
        and events[2]["data"]["message"]["content"][0]["text"] == f"at {cwd}"
    )
    assert '"dt":[0,0]' in (scenario / "session.jsonl").read_text()


def test_failed_and_cancelled_calls_become_throw_and_hang_entries(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    partial = TEXT[:3]
    error = {
        "kind": "error",
        "error": {"message": "openai: the stream was cut (after 3 chunks)", "code": "stream-cut"},
    }
    events = [
        *turn(0, "ok", [TEXT]),
        *turn(1, "fails", [partial], end=error),
        *turn(
            2, "fails early", [[]], end={"kind": "error", "error": {"message": "openai: HTTP 401"}}
        ),
        *turn(3, "cancelled", [partial], end={"kind": "cancelled"}),
    ]
    write_log(root, "s1", "/w", events)
    scenario = tmp_path / "scenario"

    export_fixture(root / "s1", scenario)

    override = json.loads((scenario / "replay.override.json").read_text())
    assert override == {
        "patches": [
            {
                "at": 1,
                "entry": {
                    "kind": "throw",
                    "chunks": partial,
                    "message": error["error"]["message"],
                    "code": "stream-cut",
                },
            },
            {"at": 2, "entry": {"kind": "throw", "chunks": [], "message": "openai: HTTP 401"}},
            {"at": 3, "entry": {"kind": "hang", "chunks": partial}},
        ]
    }
    assert (
        override_for_fixture("session.jsonl", (scenario / "session.jsonl").read_bytes())
        == (scenario / "replay.override.json").read_bytes()
    )
    assert len(ReplayProvider.from_path(scenario).primary.entries) == 4


def test_a_failed_call_in_a_subagent_cannot_be_exported(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    write_log(root, "top", "/w", turn(0, "go", [TEXT], extra=[subagent("kid", "t1")]))
    write_log(
        root,
        "kid",
        "/w",
        turn(0, "sub", [TEXT[:2]], end={"kind": "error", "error": {"message": "boom"}}),
        parent="top",
    )
    with pytest.raises(ExportError, match="subagent 1 has a model call that did not finish"):
        export_fixture(root / "top", tmp_path / "scenario")
    assert not (tmp_path / "scenario").exists()


def test_a_missing_child_log_is_named(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    write_log(root, "top", "/w", turn(0, "go", [TEXT], extra=[subagent("gone", "t1")]))
    with pytest.raises(
        ExportError, match=r"subagent session gone \(subagent/start at seq 9\) has no log in"
    ):
        export_fixture(root / "top", tmp_path / "scenario")


def test_record_server_args_come_from_the_environment() -> None:
    env = {
        "ACP_SNAPSHOT_SERVER_ARGS": "--provider openai --model 'gpt 5' --base-url http://127.0.0.1:8000/v1"
    }
    assert record_server_args(env) == [
        "--provider",
        "openai",
        "--model",
        "gpt 5",
        "--base-url",
        "http://127.0.0.1:8000/v1",
        "--titles",
        "prompt",
    ]
    with pytest.raises(ExportError, match="must select a live model"):
        record_server_args({})
    with pytest.raises(ExportError, match="--replay is set by the snapshot runner itself"):
        record_server_args({"ACP_SNAPSHOT_SERVER_ARGS": "--provider openai --model m --replay x"})
    with pytest.raises(ExportError, match="--titles is set by the snapshot runner itself"):
        record_server_args({"ACP_SNAPSHOT_SERVER_ARGS": "--provider openai --model m --titles off"})


def test_finish_recording_writes_the_override_a_recorded_fixture_needs_and_drops_stale_files(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sessions"
    error = {"kind": "error", "error": {"message": "openai: HTTP 500", "code": 500}}
    write_log(root, "s1", "/w", [*turn(0, "ok", [TEXT]), *turn(1, "fails", [TEXT[:2]], end=error)])
    exported = tmp_path / "exported"
    export_fixture(root / "s1", exported, zero_times=True)
    recorded = {"session.jsonl": (exported / "session.jsonl").read_bytes()}
    scenario = tmp_path / "scenario"
    scenario.mkdir()
    (scenario / "session.1.jsonl").write_text("stale\n")

    assert finish_recording(scenario, recorded) == ["replay.override.json", "session.1.jsonl"]
    assert (scenario / "replay.override.json").read_bytes() == (
        exported / "replay.override.json"
    ).read_bytes()
    assert finish_recording(scenario, recorded) == []  # nothing changes twice

    fine = {
        "session.jsonl": recorded["session.jsonl"].split(
            b'{"type":"turn/start","data":{"turn":1}}'
        )[0]
    }
    assert finish_recording(scenario, fine) == ["replay.override.json"]
    assert not (scenario / "replay.override.json").exists()
