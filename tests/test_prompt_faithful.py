"""The loop is faithful to its recording (SPEC 1, 5): replaying a fixture through the real server
and re-persisting it gives the fixture's logical events back, chunk for chunk, modulo times and
the workspace path (message and tool call ids come from the recording, so they are equal).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from prompt_harness import PromptServer, replace_strings

from acp_server.core.replay_script import parse_fixture, render_fixture
from acp_server.providers.replay import bundled_demo_fixture
from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

DEMO_PROMPT = 'The greeting in hello.py is wrong: it should say "Hello, world!". Can you fix it, and keep a short plan as you go?'
RECORDED_CWD = "/workspace"


def fixture_events(path: Path, cwd: str) -> list[dict[str, Any]]:
    """A fixture's logical events as {type, data, sourceRange?}, its `cwd` written `<cwd>`."""
    fixture = parse_fixture(str(path), path.read_bytes().splitlines())
    values = [msgspec.json.decode(msgspec.json.encode(e)) for e in fixture.events]
    return [
        replace_strings(
            {k: v for k, v in value.items() if k not in ("seq", "time")}, [(cwd, "<cwd>")]
        )
        for value in values
    ]


def replay_demo(server: PromptServer) -> str:
    (server.workspace / "hello.py").write_text('print("Helo world")\n')
    server.client.permissions.extend(["allow_once", "allow_once"])  # the write, then the run
    session = server.new_session()
    assert server.prompt(session, DEMO_PROMPT).stop_reason == "end_turn"
    assert (server.workspace / "hello.py").read_text() == 'print("Hello, world!")\n'
    return session


def test_replaying_the_demo_recording_re_persists_its_events_chunk_for_chunk(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, bundled_demo_fixture()) as server:
        session = replay_demo(server)

        expected = fixture_events(bundled_demo_fixture(), RECORDED_CWD)
        assert len(expected) == 353
        assert server.log(session) == expected


def test_a_re_persisted_log_replays_to_itself(tmp_path: Path) -> None:
    # First generation: the demo; second: the log it produced, rendered as a fixture.
    with PromptServer(tmp_path / "first", bundled_demo_fixture()) as first:
        session = replay_demo(first)
        recorded = read_log(first.log_path(session))
        fixture = tmp_path / "second-fixture" / "session.jsonl"
        fixture.parent.mkdir()
        fixture.write_bytes(render_fixture(recorded.header, recorded.events))

    with PromptServer(tmp_path / "second", fixture) as second:
        again = replay_demo(second)

        assert second.log(again) == fixture_events(fixture, str(first.workspace))
