"""`acp-server demo`: the main job end to end, as a newcomer runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process


def run_demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "acp_server", "demo", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_demo_runs_the_recording_end_to_end_and_prints_the_figures(tmp_path: Path) -> None:
    result = run_demo(tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "you: The greeting in hello.py is wrong" in out
    assert "  ? permission asked: Write hello.py -> allowed once\n" in out
    assert "  ? permission asked: Run python3 hello.py -> allowed once\n" in out
    assert "    [x] Fix the greeting in hello.py\n" in out
    assert "    [x] Run hello.py and check its output\n" in out
    assert 'stop reason: end_turn; hello.py now reads: print("Hello, world!")\n' in out
    assert "events                       354\n" in out  # the last is the session's title
    assert "chunk rows                    11\n" in out
    assert "Every streamed chunk is in the log; paging gave back exactly the log's events.\n" in out


def test_demo_output_is_plain_text_within_80_columns_when_not_a_terminal(tmp_path: Path) -> None:
    out = run_demo(tmp_path).stdout
    assert "\x1b[" not in out  # no colour codes in a pipe
    assert max(len(line) for line in out.splitlines() if not line.startswith("workspace ")) <= 80


def test_demo_leaves_no_files_behind(tmp_path: Path) -> None:
    assert run_demo(tmp_path).returncode == 0
    assert list((tmp_path / "tmp").iterdir()) == []


def test_demo_keeps_the_workspace_and_log_when_asked(tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    result = run_demo(tmp_path, "--keep", str(keep))
    assert result.returncode == 0, result.stderr
    assert (keep / "workspace" / "hello.py").read_text() == 'print("Hello, world!")\n'
    # Beside the session's directory, the store keeps its list index (a file).
    [session] = [path for path in (keep / "sessions").iterdir() if path.is_dir()]
    assert (session / "session.jsonl").is_file()
    verify = subprocess.run(
        [sys.executable, "-m", "acp_server", "log", "verify", str(session)],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0 and verify.stdout.endswith("OK: 354 events in 87 lines\n")


def test_demo_refuses_a_keep_path_that_is_not_a_directory_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = run_demo(tmp_path, "--keep", str(tmp_path / "file"))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"acp-server demo: error: --keep: not a directory: {tmp_path}/file\n"
