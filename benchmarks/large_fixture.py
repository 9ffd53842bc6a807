"""A large llm-replay fixture, as a snapshot suite gives one to `serve --replay` (a helper of the
start-up and load benchmarks).

It is `codec.py`'s seed-shaped session (116 turns, 417,220 events) rendered as a fixture
(canonical packing, projected form: what `acp-server fixture export` writes), about 6 MB: a
server given it must not make its client wait for it before the first model call.
"""

from __future__ import annotations

from pathlib import Path

from codec import SEED, START_TIME, build_session

from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.replay_script import FIXTURE_NAME, render_fixture


def write_large_fixture(directory: Path, seed: int = SEED) -> Path:
    """Write the fixture into `directory` (created); its path."""
    header = SessionHeader(
        version=SESSION_FORMAT_VERSION, id="fixture", created_at=START_TIME, cwd="/bench"
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FIXTURE_NAME
    path.write_bytes(render_fixture(header, build_session(seed)))
    return path
