"""Reading a log holds the cycle collector off, and gives it back as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_server.core.events import SessionTitle, SessionTitleData
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.storage import records as records_module
from acp_server.storage.collection import collection_paused
from acp_server.storage.jsonl.log import read_log
from acp_server.storage.jsonl.sessions import SessionStore


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was_enabled:
            gc.disable()


@pytest.mark.usefixtures("collector_enabled")
def test_the_collector_is_off_during_a_pause_and_on_after_it() -> None:
    with collection_paused():
        assert gc.isenabled() is False
    assert gc.isenabled() is True


@pytest.mark.usefixtures("collector_enabled")
def test_overlapping_pauses_keep_the_collector_off_until_the_last_one_ends() -> None:
    first = collection_paused()
    second = collection_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.isenabled() is False
    second.__exit__(None, None, None)
    assert gc.isenabled() is True


def test_a_collector_disabled_before_a_pause_stays_disabled_after_it() -> None:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert gc.isenabled() is False
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.usefixtures("collector_enabled")
def test_a_pause_ended_by_an_error_gives_the_collector_back() -> None:
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("boom")
    assert gc.isenabled() is True


def _one_event_log(root: Path) -> SessionStore:
    store = SessionStore(root)
    header = SessionHeader(version=SESSION_FORMAT_VERSION, id="s", created_at=0, cwd="/w")
    writer = store.create(header)
    writer.append([SessionTitle(0, 0, SessionTitleData("t"))])
    writer.close()
    return store


@pytest.mark.usefixtures("collector_enabled")
def test_reading_a_log_pauses_the_collector_and_leaves_it_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _one_event_log(tmp_path)
    seen: list[bool] = []
    real_decode = records_module.decode_record_json

    def decode(raw: bytes | str) -> object:
        seen.append(gc.isenabled())
        return real_decode(raw)

    monkeypatch.setattr(records_module, "decode_record_json", decode)
    read_log(store.log_path("s"))
    continued = store.continue_session("s", 0)
    continued.writer.close()
    assert (seen, gc.isenabled()) == ([False, False], True)
