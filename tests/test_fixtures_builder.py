"""The fixture builder the prompt tests use makes fixtures llm-replay reads back exactly."""

from __future__ import annotations

import msgspec
from fixtures_builder import Step, ToolUse, args, fragments, render, step_chunks

from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.replay_script import derive_script, parse_fixture


def test_fragments_cut_text_deterministically_and_losslessly() -> None:
    assert fragments("Hello, world!") == ["Hel", "l", "o, w", "or", "ld!"]
    assert fragments("") == []
    text = "x" * 100
    assert "".join(fragments(text)) == text


def test_a_built_fixture_is_projected_packed_and_scripts_each_step() -> None:
    steps = [
        Step(
            reasoning="Look first.",
            text="Reading.",
            calls=[ToolUse("call_1", "read_file", args(path="a.txt"))],
            usage=(5, 6),
        ),
        Step(text="Done.", finish="length"),
    ]
    raw = render([("go", steps)])
    fixture = parse_fixture("built", raw.splitlines())

    assert fixture.projected
    assert fixture.header.cwd == "/recorded"
    lines = raw.splitlines()[1:]
    assert [msgspec.json.decode(line)["type"] for line in lines].count("reasoning-chunks") == 1
    repacked = [msgspec.json.encode(r) for r in pack_chunk_runs(fixture.events)]
    assert len(repacked) == len(lines)
    script = derive_script(fixture.events)
    assert [msgspec.to_builtins(entry.chunks) for entry in script] == [
        step_chunks(s) for s in steps
    ]
