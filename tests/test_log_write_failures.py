"""A log write the machine refuses (SPEC 2.4, 2.5): the file keeps only complete records, and the
writer writes nothing more until the log is re-read.

The disk fills for real: a tmpfs and a ballast file (root is needed to mount it, as in CI).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest
from mounts import fill, tmpfs

from acp_server.core.content import TextContent
from acp_server.core.events import (
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.storage.errors import LogWriteFailed
from acp_server.storage.jsonl.log import read_log
from acp_server.storage.jsonl.writer import LogWriter

pytestmark = pytest.mark.process

HEADER = SessionHeader(version=SESSION_FORMAT_VERSION, id="s1", created_at=0, cwd="/work")


def big_message(seq: int) -> UserMessageEvent:
    text = "".join(f"{n:05d}" for n in range(4000))  # 20 KB: more than a page's slack
    return UserMessageEvent(seq, 0, UserMessageData(0, UserMessage("user-0", [TextContent(text)])))


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "1m") as root:
        yield root


@pytest.mark.parametrize("name", ["session.jsonl", "session.jsonl.zst"])
def test_a_batch_that_does_not_fit_leaves_the_log_as_it_was_and_later_writes_are_refused(
    disk: Path, name: str
) -> None:
    path = disk / name
    writer = LogWriter.open(path, HEADER, next_seq=0, create=True)
    writer.append([TurnStart(0, 0, TurnStartData(0))])
    writer.sync()
    before = path.read_bytes()
    ballast = fill(disk)
    writer.append([big_message(1)])

    with pytest.raises(LogWriteFailed) as failed:
        writer.sync()

    assert failed.value.errno == errno.ENOSPC
    assert path.read_bytes() == before
    ballast.unlink()
    with pytest.raises(LogWriteFailed):
        writer.append_one(big_message(1))
    writer.close()
    assert path.read_bytes() == before
    assert [event.seq for event in read_log(path).events] == [0]
