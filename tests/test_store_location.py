"""Which store a command uses when it names none (`acp_server.startup.store_location`), and the
launcher's look at it before the early `initialize` answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.startup.launch import store_ready_early
from acp_server.startup.store_location import StoreChoice, choose_store


@pytest.mark.parametrize(
    ("store", "sessions_dir", "environ", "chosen"),
    [
        ("sqlite:///s.db", None, {"ACP_SERVER_STORE": "/e"}, ("sqlite:///s.db", "--store")),
        (None, "/d", {"ACP_SERVER_STORE": "/e"}, ("/d", "--sessions-dir")),
        (
            None,
            None,
            {"ACP_SERVER_STORE": "/e", "ACP_SERVER_SESSIONS_DIR": "/f"},
            ("/e", "ACP_SERVER_STORE"),
        ),
        (None, None, {"ACP_SERVER_SESSIONS_DIR": "/f"}, ("/f", "ACP_SERVER_SESSIONS_DIR")),
        (
            None,
            None,
            {"ACP_SERVER_STORE": "", "ACP_SERVER_SESSIONS_DIR": ""},
            (None, "the platform's user data directory"),
        ),
    ],
)
def test_the_first_store_named_is_chosen(
    store: str | None, sessions_dir: str | None, environ: dict[str, str], chosen: tuple[str, str]
) -> None:
    assert choose_store(store, sessions_dir, environ) == StoreChoice(*chosen)


def test_both_flags_are_refused() -> None:
    with pytest.raises(ValueError) as raised:
        choose_store("/a", "/b", {})
    assert str(raised.value) == (
        "--store and --sessions-dir: give one of them (a directory is a store URL)"
    )


def test_the_launcher_makes_a_missing_sessions_dir_and_answers_early(tmp_path: Path) -> None:
    sessions = tmp_path / "a" / "sessions"
    assert store_ready_early(["--sessions-dir", str(sessions)], {}) is True
    assert sessions.is_dir()


@pytest.mark.parametrize(
    "args",
    [
        ["--sessions-dir", "{tmp}/file"],
        ["--sessions-dir={tmp}/file/below"],
        ["--store", "{tmp}/file"],
        ["--store", "sqlite:///{tmp}/s.db"],  # a database is checked in full first
        ["--store", "file:///{tmp}/a%20b"],  # an escape: the URL parser reads it
        ["--s", "{tmp}"],  # ambiguous: argparse refuses it
        ["--store", "{tmp}", "--sessions-dir", "{tmp}"],
        ["--sessions-dir"],
    ],
)
def test_the_launcher_leaves_a_store_it_cannot_vouch_for_to_the_full_check(
    tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "file").write_text("x")
    assert store_ready_early([a.format(tmp=tmp_path) for a in args], {}) is False


def test_the_launcher_reads_the_store_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert store_ready_early([], {"ACP_SERVER_STORE": str(tmp_path / "file")}) is False
    assert store_ready_early([], {"ACP_SERVER_STORE": f"file://{tmp_path}"}) is True
