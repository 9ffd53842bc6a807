"""The file side of `/rewind` (`agent.checkpoints`): digests of the files now, and restoring or
removing them beneath the session's directories only."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from acp_server.agent.checkpoints import UNREADABLE, current_digests, restore_file
from acp_server.agent.confinement import Directories, PathRefused


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


def roots(work: Path) -> Directories:
    return Directories(work, [], None)


def test_the_digest_of_a_file_is_its_sha256_and_an_absent_one_none(work: Path) -> None:
    (work / "a.txt").write_bytes(b"\x00bytes\xff")
    (work / "dir").mkdir()
    digests = current_digests(
        [str(work / "a.txt"), str(work / "gone.txt"), str(work / "dir")], roots(work)
    )
    assert digests == {
        str(work / "a.txt"): hashlib.sha256(b"\x00bytes\xff").hexdigest(),
        str(work / "gone.txt"): None,
        str(work / "dir"): UNREADABLE,
    }


def test_a_file_outside_the_session_is_unreadable(work: Path) -> None:
    (work.parent / "outside.txt").write_text("x")
    path = str(work.parent / "outside.txt")
    assert current_digests([path], roots(work)) == {path: UNREADABLE}


def test_restoring_writes_the_bytes_exactly_creating_parents(work: Path) -> None:
    (work / "a.txt").write_text("a much longer text than the one restored\n")
    restore_file(str(work / "a.txt"), b"short\r\n\xff", roots(work))
    restore_file(str(work / "new/dir/b.txt"), b"b", roots(work))
    assert ((work / "a.txt").read_bytes(), (work / "new/dir/b.txt").read_bytes()) == (
        b"short\r\n\xff",
        b"b",
    )


def test_restoring_an_absent_file_removes_it_and_an_absent_one_stays_absent(work: Path) -> None:
    (work / "a.txt").write_text("x")
    restore_file(str(work / "a.txt"), None, roots(work))
    restore_file(str(work / "never.txt"), None, roots(work))
    assert sorted(p.name for p in work.iterdir()) == []


def test_a_path_outside_the_session_is_neither_written_nor_removed(work: Path) -> None:
    outside = work.parent / "outside.txt"
    outside.write_text("keep")
    with pytest.raises(PathRefused):
        restore_file(str(outside), b"changed", roots(work))
    with pytest.raises(PathRefused):
        restore_file(str(outside), None, roots(work))
    assert outside.read_text() == "keep"


def test_a_symlink_leading_out_is_not_followed_when_restoring(work: Path) -> None:
    outside = work.parent / "outside.txt"
    outside.write_text("keep")
    (work / "link.txt").symlink_to(outside)
    with pytest.raises(PathRefused):
        restore_file(str(work / "link.txt"), b"changed", roots(work))
    assert outside.read_text() == "keep"
