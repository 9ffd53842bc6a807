"""Which project instruction files a session reads, in which order, and what it refuses
(`agent.instructions`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from acp_server.agent.instructions import (
    MAX_FILE_BYTES,
    instruction_directories,
    read_instructions,
    repository_root,
)
from acp_server.core.events import InstructionFile
from acp_server.core.prompt_render import InstructionSource


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def paths(tmp_path: Path, cwd: Path, config: Path | None = None) -> list[str]:
    return [str(Path(s.path).relative_to(tmp_path)) for s in read_instructions(cwd, config).sources]


def test_from_the_repository_root_down_to_the_working_directory_nearest_last(
    tmp_path: Path,
) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    write(tmp_path / "AGENTS.md", "above the repository")
    write(tmp_path / "repo" / "AGENTS.md", "root")
    write(tmp_path / "repo" / "a" / "AGENTS.md", "a")
    cwd = tmp_path / "repo" / "a" / "b"
    write(cwd / "AGENTS.md", "b")
    assert paths(tmp_path, cwd) == ["repo/AGENTS.md", "repo/a/AGENTS.md", "repo/a/b/AGENTS.md"]


def test_claude_md_is_read_only_where_there_is_no_agents_md(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / "CLAUDE.md", "root claude")
    cwd = tmp_path / "app"
    write(cwd / "AGENTS.md", "app agents")
    write(cwd / "CLAUDE.md", "app claude")
    assert paths(tmp_path, cwd) == ["CLAUDE.md", "app/AGENTS.md"]


def test_the_users_own_file_comes_first(tmp_path: Path) -> None:
    config = tmp_path / "config"
    write(config / "AGENTS.md", "mine")
    write(config / "CLAUDE.md", "never read here")
    cwd = tmp_path / "work"
    write(cwd / "AGENTS.md", "work")
    assert paths(tmp_path, cwd, config) == ["config/AGENTS.md", "work/AGENTS.md"]


def test_outside_a_repository_only_the_working_directorys_own_is_read(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "parent")
    cwd = tmp_path / "loose"
    write(cwd / "AGENTS.md", "here")
    assert repository_root(cwd) is None
    assert instruction_directories(cwd) == [cwd]
    assert paths(tmp_path, cwd) == ["loose/AGENTS.md"]


def test_a_worktrees_git_file_marks_the_root_too(tmp_path: Path) -> None:
    write(tmp_path / "wt" / ".git", "gitdir: /elsewhere\n")
    assert repository_root(tmp_path / "wt" / "src") == tmp_path / "wt"


def test_the_log_keeps_each_files_path_digest_and_size(tmp_path: Path) -> None:
    path = write(tmp_path / "AGENTS.md", "Use tabs.\n")
    read = read_instructions(tmp_path, None)
    assert read.files == [
        InstructionFile(str(path), hashlib.sha256(b"Use tabs.\n").hexdigest(), 10)
    ]
    assert read.sources == [InstructionSource(str(path), b"Use tabs.\n", 10)]


def test_a_symlink_to_a_file_inside_the_repository_is_followed(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / "docs" / "agents.md", "shared")
    os.symlink(tmp_path / "docs" / "agents.md", tmp_path / "AGENTS.md")
    assert [s.data for s in read_instructions(tmp_path, None).sources] == [b"shared"]


def test_a_symlink_out_of_the_repository_is_not_read(tmp_path: Path) -> None:
    secret = write(tmp_path / "secret.txt", "a key")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    os.symlink(secret, repo / "AGENTS.md")
    write(repo / "CLAUDE.md", "the fallback")
    assert [s.data for s in read_instructions(repo, None).sources] == [b"the fallback"]


def test_a_directory_or_fifo_named_agents_md_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()
    write(tmp_path / "CLAUDE.md", "claude")
    assert [s.data for s in read_instructions(tmp_path, None).sources] == [b"claude"]
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "AGENTS.md")
    assert read_instructions(fifo_dir, None).sources == []


@pytest.mark.parametrize("extra", [1, 1000])
def test_a_file_over_1_mib_is_not_read_and_not_logged(tmp_path: Path, extra: int) -> None:
    write(tmp_path / "AGENTS.md", "x" * (MAX_FILE_BYTES + extra))
    read = read_instructions(tmp_path, None)
    assert read.sources == [
        InstructionSource(str(tmp_path / "AGENTS.md"), None, MAX_FILE_BYTES + extra)
    ]
    assert read.files == []
