"""Snapshot scenarios (SPEC 6): every recorded conversation in `snapshots/` driven through the
real server, and the corpus itself checked.

`ACP_SNAPSHOT` selects the mode: `replay` (the default) compares each run with the committed
transcript and logs; `refresh` rewrites them from the run (only the files whose bytes change);
`record` runs each scenario against the live model `ACP_SNAPSHOT_SERVER_ARGS` names (e.g.
`--provider openai --model NAME --base-url URL`, the key in `$OPENAI_API_KEY`), writes its
fixtures and transcript, and checks that they replay as the live run went. See docs/snapshots.md.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import msgspec
import pytest
from acp_models import AGENT_RESULTS, CLIENT_RESULTS, TO_AGENT_PARAMS, TO_CLIENT_PARAMS, exact

from acp_server.cli.fixture import ExportError, finish_recording, record_server_args
from acp_server.core.events import SubagentStart
from acp_server.core.replay_script import (
    ChunksEntry,
    HangEntry,
    PatchSet,
    ThrowEntry,
    apply_override,
    derive_script,
    parse_fixture,
    parse_override,
)
from acp_server.schemas import SNAPSHOT_INPUT, rendered
from acp_server.testing.checks import check_scenario
from acp_server.testing.compare import compare, describe, refresh
from acp_server.testing.draft import DraftFile, write_draft
from acp_server.testing.normalize import Normalizer
from acp_server.testing.runner import ScenarioError, run_scenario
from acp_server.testing.scenario import (
    CancelWhen,
    FollowStep,
    LoadStep,
    PageAllStep,
    PermissionAnswer,
    PromptStep,
    RestartStep,
    ScenarioInput,
    check_steps,
    load_input,
)

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = ROOT / "snapshots"
SCENARIOS = sorted(p for p in SNAPSHOTS.iterdir() if p.is_dir()) if SNAPSHOTS.is_dir() else []
MODE = os.environ.get("ACP_SNAPSHOT", "replay")
SERVER_ARGS_ENV = "ACP_SNAPSHOT_SERVER_ARGS"
MODES = ("replay", "refresh", "record")


def by_name(path: Path) -> str:
    return path.name


@pytest.mark.process
@pytest.mark.parametrize("scenario", SCENARIOS, ids=by_name)
def test_scenario(scenario: Path, tmp_path: Path) -> None:
    if MODE not in MODES:
        pytest.fail(f"ACP_SNAPSHOT={MODE!r}: choose one of {', '.join(MODES)}", pytrace=False)
    if MODE == "record":
        record(scenario, tmp_path)
        return
    try:
        result = run_scenario(scenario, work_dir=tmp_path)
    except ScenarioError as exc:
        pytest.fail(str(exc), pytrace=False)
    if MODE == "refresh":
        refresh(scenario, result)
        return
    mismatches = compare(scenario, result)
    if mismatches:
        stderr = f"\n\nserver stderr:\n{result.stderr}" if result.stderr.strip() else ""
        pytest.fail(
            f"{scenario.name}: the run differs from the committed snapshot "
            f"(if the change is intended: ACP_SNAPSHOT=refresh pytest tests/test_snapshots.py -k {scenario.name})\n\n"
            + describe(mismatches)
            + stderr,
            pytrace=False,
        )


@pytest.mark.process
@pytest.mark.skipif(MODE != "replay", reason="refresh and record write JSONL fixtures")
@pytest.mark.parametrize("scenario", SCENARIOS, ids=by_name)
def test_scenario_on_sqlite(scenario: Path, tmp_path: Path) -> None:
    """The same run with the server's sessions in one SQLite database (SPEC 2.6): the same
    transcript, and the same logical events in every session."""
    try:
        result = run_scenario(scenario, work_dir=tmp_path, engine="sqlite")
    except ScenarioError as exc:
        pytest.fail(str(exc), pytrace=False)
    mismatches = compare(scenario, result)
    if mismatches:
        pytest.fail(f"{scenario.name} on SQLite:\n\n" + describe(mismatches), pytrace=False)


@pytest.mark.process
@pytest.mark.skipif(MODE != "replay", reason="refresh and record write JSONL fixtures")
@pytest.mark.parametrize("scenario", SCENARIOS, ids=by_name)
def test_scenario_on_postgresql(scenario: Path, tmp_path: Path, postgres_url: str) -> None:
    """The same run with the server's sessions in a PostgreSQL database (SPEC 2.6): the same
    transcript, and the same logical events in every session."""
    try:
        result = run_scenario(scenario, work_dir=tmp_path, store=postgres_url)
    except ScenarioError as exc:
        pytest.fail(str(exc), pytrace=False)
    mismatches = compare(scenario, result)
    if mismatches:
        pytest.fail(f"{scenario.name} on PostgreSQL:\n\n" + describe(mismatches), pytrace=False)


def record(scenario: Path, tmp_path: Path) -> None:
    """ACP_SNAPSHOT=record: run against the live model `ACP_SNAPSHOT_SERVER_ARGS` names, write
    the scenario's fixtures and transcript from that run, then prove they replay identically."""
    if not os.environ.get(SERVER_ARGS_ENV):
        pytest.skip(
            f"ACP_SNAPSHOT=record needs ${SERVER_ARGS_ENV}, e.g. '--provider openai --model NAME'"
        )
    try:
        model_args = record_server_args()
        result = run_scenario(scenario, work_dir=tmp_path / "record", model_args=model_args)
        refresh(scenario, result)
        finish_recording(scenario, result.logs)
        replayed = run_scenario(scenario, work_dir=tmp_path / "replay")
    except (ExportError, ScenarioError) as exc:
        pytest.fail(str(exc), pytrace=False)
    mismatches = compare(scenario, replayed)
    assert not mismatches, (
        f"{scenario.name}: the recording does not replay as it ran\n\n" + describe(mismatches)
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=by_name)
def test_scenario_files(scenario: Path) -> None:
    """Every committed fixture parses and is canonical packed; nothing is missing, orphaned or
    unused."""
    problems = check_scenario(scenario)
    assert not problems, f"{scenario.name}:\n" + "\n".join(problems)


def test_snapshot_input_schema_is_fresh() -> None:
    committed = ROOT / "schemas" / "snapshot-input.schema.json"
    assert committed.is_file(), "missing: regenerate with python -m acp_server.schemas"
    assert committed.read_bytes() == rendered()[SNAPSHOT_INPUT], (
        "schemas/snapshot-input.schema.json is stale: regenerate with python -m acp_server.schemas"
    )


# ---------------------------------------------------------------------------------------------
# The corpus covers what issue 7 asks for.


def _features() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}

    def add(feature: str, scenario: Path) -> None:
        found.setdefault(feature, []).append(scenario.name)

    for scenario in SCENARIOS:
        steps = load_input(scenario / "input.json").steps
        fixture = parse_fixture(
            "session.jsonl", (scenario / "session.jsonl").read_bytes().splitlines()
        )
        events = [msgspec.to_builtins(e) for e in fixture.events]
        chunks = [e["data"]["chunk"] for e in events if e["type"] == "assistant/chunk"]
        for name in {e["data"]["name"] for e in events if e["type"] == "tool/call"}:
            add(f"tool {name}", scenario)
        kinds = {c["type"] for c in chunks}
        if "tool-call-delta" not in kinds and "reasoning-delta" not in kinds:
            add("plain text", scenario)
        if sum(len(c["text"]) for c in chunks if c["type"] == "reasoning-delta") >= 1000:
            add("long reasoning", scenario)
        if any(e["type"] == "tool/result" and e["data"].get("isError") for e in events):
            add("tool error", scenario)
        if (
            any(type(e) is SubagentStart for e in fixture.events)
            and (scenario / "session.1.jsonl").is_file()
        ):
            add("subagent with its child fixture", scenario)
        if {"type": "finish", "reason": "length"} in chunks:
            add("finish length", scenario)
        for step in steps:
            if isinstance(step, PromptStep):
                for answer in step.answers:
                    if isinstance(answer, PermissionAnswer) and isinstance(answer.option_id, str):
                        add(f"permission {answer.option_id}", scenario)
            if isinstance(step, LoadStep) and isinstance(step.max_messages, int):
                add("load with tail replay", scenario)
            if isinstance(step, PageAllStep):
                add("session.page walked to the start", scenario)
            if isinstance(step, FollowStep):
                later = steps[steps.index(step) + 1 :]
                if any(isinstance(s, PromptStep) for s in later):
                    add("session.follow during a prompt", scenario)
        restarts = [i for i, s in enumerate(steps) if isinstance(s, RestartStep)]
        if (
            restarts
            and any(isinstance(s, LoadStep) for s in steps[restarts[0] :])
            and any(isinstance(s, PromptStep) for s in steps[: restarts[0]])
            and any(isinstance(s, PromptStep) for s in steps[restarts[0] :])
        ):
            add("multi-turn across two processes with session/load", scenario)
        override_path = scenario / "replay.override.json"
        if override_path.is_file():
            override = parse_override("override", override_path.read_bytes())
            entries = (
                [p.entry for p in override.patches] if isinstance(override, PatchSet) else override
            )
            if any(
                isinstance(e, HangEntry) and isinstance(e.ready_file, str) for e in entries
            ) and any(
                isinstance(s, PromptStep)
                and isinstance(s.cancel, CancelWhen)
                and isinstance(s.cancel.when_file, str)
                for s in steps
            ):
                add("cancel mid-stream (hang with readyFile)", scenario)
            if any(isinstance(e, ThrowEntry) for e in entries):
                add("failed stream (throw)", scenario)
            if "{{fromRequest:" in override_path.read_text(encoding="utf-8"):
                add("{{fromRequest}}", scenario)
    return found


REQUIRED_FEATURES = [
    "plain text",
    "long reasoning",
    "tool read_file",
    "tool write_file",
    "tool run_command",
    "tool todo_write",
    "tool task",
    "permission allow_once",
    "permission allow_always",
    "permission reject_once",
    "tool error",
    "subagent with its child fixture",
    "cancel mid-stream (hang with readyFile)",
    "failed stream (throw)",
    "finish length",
    "{{fromRequest}}",
    "multi-turn across two processes with session/load",
    "load with tail replay",
    "session.page walked to the start",
    "session.follow during a prompt",
]


def test_corpus_covers_issue_7() -> None:
    assert len(SCENARIOS) >= 14, f"{len(SCENARIOS)} scenarios; the corpus needs at least 14"
    found = _features()
    missing = [feature for feature in REQUIRED_FEATURES if feature not in found]
    assert not missing, f"no scenario covers: {missing}"


# ---------------------------------------------------------------------------------------------
# The runner catches a broken server, and says where.

BREAKS = {
    "duplicate-chunk": """
from acp_server.providers import replay
from acp_server.core.stream import TextDelta
original = replay.ReplayProvider.stream
async def stream(self, request):
    doubled = False
    async for chunk in original(self, request):
        yield chunk
        if type(chunk) is TextDelta and not doubled:
            doubled = True
            yield chunk  # the bug: one chunk replayed twice
replay.ReplayProvider.stream = stream
""",
    "drop-tool-call": """
from acp_server.agent import loop
original = loop.Turn._show
async def show(self, update):
    if type(update).__name__ != "ToolCallStarted":  # the bug: no tool_call update
        await original(self, update)
loop.Turn._show = show
""",
}


def broken_server(name: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        BREAKS[name] + "\nimport sys\nfrom acp_server.cli.main import main\nsys.exit(main())\n",
    ]


@pytest.mark.process
def test_a_chunk_replayed_twice_is_caught(tmp_path: Path) -> None:
    scenario = SNAPSHOTS / "plain-text"
    mismatches = compare(
        scenario,
        run_scenario(scenario, work_dir=tmp_path, command=broken_server("duplicate-chunk")),
    )
    report = describe(mismatches)
    assert {m.name for m in mismatches} == {"stdout.expected.jsonl", "session.jsonl"}, report
    # The first text fragment of each model call shows twice: the transcript diff adds just
    # those updates, each next to its twin, and removes nothing.
    lines = next(m.diff for m in mismatches if m.name == "stdout.expected.jsonl").splitlines()
    added = [i for i, line in enumerate(lines) if line.startswith("+{")]
    assert added and not any(line.startswith("-{") for line in lines), report
    for i in added:
        assert '"agent_message_chunk"' in lines[i] and " " + lines[i][1:] in (
            lines[i - 1],
            lines[i + 1],
        ), report
    # The log diff shows the extra chunk event, and the message assembled with it.
    log = next(m.diff for m in mismatches if m.name == "session.jsonl").splitlines()
    assert any(line.startswith("+") and '"text-delta"' in line for line in log), report
    assert any(
        line.startswith("+") and '"text":"Use inUse integer cents.' in line for line in log
    ), report


@pytest.mark.process
def test_a_dropped_tool_call_update_is_caught(tmp_path: Path) -> None:
    scenario = SNAPSHOTS / "read-file-client-fs"
    mismatches = compare(
        scenario, run_scenario(scenario, work_dir=tmp_path, command=broken_server("drop-tool-call"))
    )
    report = describe(mismatches)
    assert [m.name for m in mismatches] == ["stdout.expected.jsonl"], report  # the log is intact
    removed = [line for line in mismatches[0].diff.splitlines() if line.startswith("-{")]
    assert removed and all('"sessionUpdate":"tool_call"' in line for line in removed), report


# ---------------------------------------------------------------------------------------------
# The runner's own rules, on a scratch copy of a scenario.


def scratch_copy(name: str, tmp_path: Path) -> Path:
    copy = tmp_path / name
    shutil.copytree(SNAPSHOTS / name, copy)
    return copy


@pytest.mark.process
def test_refresh_of_an_unchanged_scenario_writes_nothing(tmp_path: Path) -> None:
    copy = scratch_copy("plain-text", tmp_path)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in copy.iterdir() if p.is_file()}
    assert refresh(copy, run_scenario(copy, work_dir=tmp_path / "work")) == []
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in copy.iterdir() if p.is_file()}
    assert after == before


@pytest.mark.process
def test_an_unused_answer_fails_the_run(tmp_path: Path) -> None:
    copy = scratch_copy("plain-text", tmp_path)
    script = json.loads((copy / "input.json").read_text())
    script["steps"][2]["answers"] = [{"kind": "permission", "optionId": "allow_once"}]
    (copy / "input.json").write_text(json.dumps(script))
    with pytest.raises(ScenarioError, match=r"answers\[0\] never used"):
        run_scenario(copy, work_dir=tmp_path / "work")


@pytest.mark.process
def test_a_missing_answer_fails_the_run(tmp_path: Path) -> None:
    copy = scratch_copy("write-file-allow-once", tmp_path)
    script = json.loads((copy / "input.json").read_text())
    prompt = next(s for s in script["steps"] if s["op"] == "prompt")
    prompt["answers"] = prompt["answers"][:1]
    (copy / "input.json").write_text(json.dumps(script))
    with pytest.raises(ScenarioError, match="no answer left"):
        run_scenario(copy, work_dir=tmp_path / "work")


def test_an_orphaned_file_and_a_stale_fixture_are_reported(tmp_path: Path) -> None:
    copy = scratch_copy("subagent-task", tmp_path)
    (copy / "notes.txt").write_text("scratch")
    shutil.copy(copy / "session.1.jsonl", copy / "session.2.jsonl")
    fixture = copy / "session.jsonl"
    fixture.write_bytes(fixture.read_bytes().replace(b',"dt":[0,', b',"dt":[5,', 1))
    problems = "\n".join(check_scenario(copy))
    assert "notes.txt: not a scenario file" in problems
    assert "session.2.jsonl: orphaned" in problems
    assert "times are not normalized" in problems


def test_a_missing_child_fixture_and_an_unused_override_are_reported(tmp_path: Path) -> None:
    copy = scratch_copy("subagent-task", tmp_path)
    (copy / "session.1.jsonl").unlink()
    (copy / "replay.override.json").write_text(
        '{"patches": [{"at": 99, "entry": {"kind": "chunks", "chunks": []}}]}'
    )
    problems = "\n".join(check_scenario(copy))
    assert "session.1.jsonl: missing" in problems
    assert "past the end of the script" in problems


def test_normalizer_numbers_ids_by_first_appearance() -> None:
    a, b, s = "a" * 32, "b" * 32, "c" * 32
    normalizer = Normalizer([("/tmp/x/workspace", "<workspace>")], [a, b], [s])
    value = normalizer.value(
        {
            "sessionId": b,
            "text": f"child {a} in /tmp/x/workspace/app.py",
            "subscriptionId": s,
            "event": {
                "type": "turn/start",
                "seq": 3,
                "time": 1_700_000_000_123,
                "data": {"turn": 0},
            },
            "chunks": {"type": "text-chunks", "seq0": 4, "time0": 17, "data": {"dt": [3, -1]}},
            "updatedAt": "2025-01-02T03:04:05.678Z",
            "other": "d" * 32,
        }
    )
    assert value == {
        "sessionId": "<session-1>",
        "text": "child <session-2> in <workspace>/app.py",
        "subscriptionId": "<subscription-1>",
        "event": {"type": "turn/start", "seq": 3, "time": 0, "data": {"turn": 0}},
        "chunks": {"type": "text-chunks", "seq0": 4, "time0": 0, "data": {"dt": [0, 0]}},
        "updatedAt": "<time>",
        "other": "d" * 32,
    }


def test_a_recordings_own_system_prompt_inputs_are_left_out_of_its_log() -> None:
    from acp_server.core.content import TextContent
    from acp_server.core.events import (
        InstructionFile,
        PromptSettings,
        SessionContext,
        SessionContextData,
        TurnStart,
        TurnStartData,
    )
    from acp_server.core.header import SessionHeader

    settings = PromptSettings("acp-server:default", "d", "Linux", "2026-12-03")
    files = [InstructionFile("/w/AGENTS.md", "s", 1)]
    events = [
        SessionContext(0, 0, SessionContextData(files, settings=settings)),
        TurnStart(1, 0, TurnStartData(0)),
        SessionContext(
            2, 0, SessionContextData(files, "append", [TextContent("Be brief.")], settings)
        ),
    ]
    header = SessionHeader(version=2, id="a" * 32, created_at=5, cwd="/w")
    log = Normalizer([("/w", "<workspace>")], ["a" * 32], []).log(header, events)
    assert log.decode().splitlines()[1:] == [
        '{"type":"turn/start","data":{"turn":0}}',
        '{"type":"session/context","data":{"instructions":[],"systemPromptMode":"append",'
        '"systemPrompt":[{"type":"text","text":"Be brief."}]}}',
    ]


# ---------------------------------------------------------------------------------------------
# The committed transcripts are ACP: every frame either side sent fits the official models.

REQUEST_PARAMS = {**TO_AGENT_PARAMS, **TO_CLIENT_PARAMS}
RESULTS = {**AGENT_RESULTS, **CLIENT_RESULTS}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=by_name)
def test_transcript_frames_fit_the_acp_models(scenario: Path) -> None:
    methods: dict[tuple[str, object], str] = {}  # (who asked, request id) -> method, per process
    for number, line in enumerate(
        (scenario / "stdout.expected.jsonl").read_text(encoding="utf-8").splitlines(), 1
    ):
        value = json.loads(line)
        if "process" in value:
            methods = {}
            continue
        sender = "client" if "client" in value else "server"
        frame = value.get("client", value)
        where = f"{scenario.name}/stdout.expected.jsonl:{number}"
        assert frame.get("jsonrpc") == "2.0", where
        if "method" in frame:
            if "id" in frame:
                methods[(sender, frame["id"])] = frame["method"]
            model = REQUEST_PARAMS.get(frame["method"])
            if model is not None:
                exact(model, frame["params"], where)
        elif "result" in frame:
            asker = "server" if sender == "client" else "client"
            model = RESULTS.get(methods.get((asker, frame["id"]), ""))
            if model is not None:
                exact(model, frame["result"], where)
        else:
            assert set(frame["error"]) <= {"code", "message", "data"}, where


# ---------------------------------------------------------------------------------------------
# Authoring helpers.


def test_steps_out_of_order_are_named() -> None:
    steps = msgspec.convert(
        {
            "description": "x",
            "steps": [
                {"op": "prompt", "prompt": "hi"},
                {"op": "initialize"},
                {"op": "new"},
                {"op": "new"},
            ],
        },
        ScenarioInput,
    ).steps
    assert check_steps(steps) == [
        "steps[0] (prompt): each server process starts with an initialize step",
        "steps[0] (prompt): comes before the new step that creates the session",
        "steps[3] (new): a scenario has one top-level session (one new step)",
    ]


def test_a_draft_becomes_a_script_with_its_override(tmp_path: Path) -> None:
    draft = msgspec.convert(
        {
            "calls": [
                {
                    "reasoning": "Look first.",
                    "tools": [{"name": "read_file", "arguments": {"path": "a.py"}}],
                },
                {"text": "Done.", "usage": [10, 2]},
                {"text": "Partial", "throw": {"message": "overloaded", "code": 529}},
                {"text": "Ticket {{fromRequest:(T-\\d+)}}.", "patch": True},
            ],
            "children": [[{"text": "child answer"}]],
        },
        DraftFile,
    )
    written = sorted(p.name for p in write_draft(draft, tmp_path))
    assert written == ["replay.override.json", "session.1.jsonl", "session.jsonl"]
    fixture = parse_fixture("session.jsonl", (tmp_path / "session.jsonl").read_bytes().splitlines())
    override = parse_override("override", (tmp_path / "replay.override.json").read_bytes())
    script = apply_override("session.jsonl", derive_script(fixture.events), override)
    assert [type(entry).__name__ for entry in script] == [
        "ChunksEntry",
        "ChunksEntry",
        "ThrowEntry",
        "ChunksEntry",
    ]
    # Turns and steps as the server will number them: a tool call continues the turn.
    steps = [(e.data.turn, e.data.step) for e in fixture.events if type(e).__name__ == "StepStart"]
    assert steps == [(0, 0), (0, 1), (1, 0), (2, 0)]
    text = "".join(c.text for c in script[3].chunks if type(c).__name__ == "TextDelta")
    assert "{{fromRequest:(T-\\d+)}}" in text  # a placeholder is never cut into fragments
    assert isinstance(script[0], ChunksEntry) and script[0].chunks[-1].reason == "tool-calls"


@pytest.mark.process
def test_record_mode_writes_fixtures_that_replay_as_the_live_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ACP_SNAPSHOT=record against a loopback OpenAI-compatible server: the scenario's fixture
    and transcript come from the live run, and replaying them gives the same transcript."""
    from openai_server import FakeOpenAI, Sse, chunk, text, usage

    scenario = tmp_path / "plain-text"
    scenario.mkdir()
    shutil.copy(SNAPSHOTS / "plain-text" / "input.json", scenario / "input.json")
    answers = [
        ["Integer", " cents", ": floats", " cannot", " hold", " 0.10", " exactly."],
        ["Round", " half", " to", " even", " at", " the", " cent."],
    ]
    script = [
        Sse([*(text(t) for t in words), chunk(finish="stop"), usage(12, 7)]) for words in answers
    ]
    with FakeOpenAI(script) as server:
        monkeypatch.setenv(
            SERVER_ARGS_ENV, f"--provider openai --model test --base-url {server.base_url}"
        )
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
        record(scenario, tmp_path)
    assert sorted(p.name for p in scenario.iterdir()) == [
        "input.json",
        "session.jsonl",
        "stdout.expected.jsonl",
    ]
    assert check_scenario(scenario) == []
    replayed = run_scenario(scenario, work_dir=tmp_path / "again")
    assert compare(scenario, replayed) == []
    assert "Integer cents: floats cannot hold 0.10 exactly." in "".join(
        json.loads(line).get("params", {}).get("update", {}).get("content", {}).get("text", "")
        for line in (scenario / "stdout.expected.jsonl").read_text().splitlines()
    )


@pytest.mark.process
def test_record_mode_records_anthropic_thinking_with_its_signatures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ACP_SNAPSHOT=record against a loopback Anthropic server: the signed thinking is in the
    fixture (a signature chunk and a signed reasoning block) and replays as the live run."""
    from anthropic_server import FakeAnthropic, Sse, reply, text_block, thinking_block

    scenario = tmp_path / "plain-text"
    scenario.mkdir()
    shutil.copy(SNAPSHOTS / "plain-text" / "input.json", scenario / "input.json")
    script = [
        Sse(
            reply(thinking_block(0, "Money ", "math.", signature=f"sig-{n}"), text_block(1, *words))
        )
        for n, words in enumerate([["Integer", " cents."], ["Round", " half", " to even."]])
    ]
    with FakeAnthropic(script) as server:
        monkeypatch.setenv(
            SERVER_ARGS_ENV, f"--provider anthropic --model test --base-url {server.base_url}"
        )
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-secret")
        record(scenario, tmp_path)
    assert check_scenario(scenario) == []
    fixture = (scenario / "session.jsonl").read_text()
    assert '"chunk":{"type":"reasoning-signature","index":0,"signature":"sig-1"}' in fixture
    assert '{"type":"reasoning","text":"Money math.","signature":"sig-0"}' in fixture
    replayed = run_scenario(scenario, work_dir=tmp_path / "again")
    assert compare(scenario, replayed) == []
