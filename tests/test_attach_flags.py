"""`acp-server attach`'s reading of the serve flags (pure): the static table is the serve
parser's, and the key of a server is its flags normalised."""

from __future__ import annotations

import argparse

from acp_server.cli.parser import build_parser
from acp_server.providers.names import key_variables
from acp_server.startup.attach_flags import (
    PATH,
    REPEATED,
    SERVE_FLAGS,
    STORE_SCHEMES,
    SWITCH,
    VALUE,
    normalise,
    resolve,
)
from acp_server.startup.attach_places import KEY_VARIABLES, server_environment
from acp_server.storage.engines import ENGINES

CWD = "/home/me/project"


def serve_actions() -> list[argparse.Action]:
    parser = build_parser("serve")
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in subparsers.choices["serve"]._actions if a.dest != "help"]


def kind_of(action: argparse.Action) -> str:
    if isinstance(action, argparse._StoreTrueAction):
        return SWITCH
    if isinstance(action, argparse._AppendAction):
        return REPEATED
    return PATH if getattr(action.type, "__name__", None) == "path" else VALUE


def test_the_static_table_is_the_serve_parsers_flags_exactly() -> None:
    table = {
        action.option_strings[0]: (
            kind_of(action),
            None
            if action.default is None or action.default is False or action.default == []
            else str(action.default),
        )
        for action in serve_actions()
    }
    assert table == SERVE_FLAGS


def test_every_serve_flag_has_one_option_string() -> None:
    assert [a.option_strings for a in serve_actions() if len(a.option_strings) != 1] == []


def test_the_key_variables_are_the_providers() -> None:
    assert key_variables() == KEY_VARIABLES


def test_a_relative_and_an_absolute_sessions_dir_are_the_same_server() -> None:
    relative = normalise(["--sessions-dir", "sessions"], {}, CWD)
    absolute = normalise([f"--sessions-dir={CWD}/./sessions/"], {}, CWD)
    assert relative.key_text() == absolute.key_text()
    assert relative.values["--sessions-dir"] == f"{CWD}/sessions"


def test_flag_order_prefixes_and_defaults_do_not_change_the_key() -> None:
    one = normalise(["--mode", "plan", "--pace-ms", "0", "--sessions-dir", "/s"], {}, CWD)
    other = normalise(["--sessions-d", "/s", "--mode=plan"], {}, CWD)
    assert one.key_text() == other.key_text()


def test_other_flags_are_another_key() -> None:
    assert (
        normalise(["--mode", "plan"], {}, CWD).key_text()
        != normalise(["--mode", "default"], {}, CWD).key_text()
    )


def test_the_environments_store_is_folded_in_as_the_flag() -> None:
    from_env = normalise([], {"ACP_SERVER_SESSIONS_DIR": "rel"}, CWD)
    assert from_env.key_text() == normalise(["--sessions-dir", f"{CWD}/rel"], {}, CWD).key_text()
    assert from_env.argv() == ["--sessions-dir", f"{CWD}/rel"]
    url = normalise([], {"ACP_SERVER_STORE": "sqlite:///a.db"}, CWD)
    assert url.argv() == ["--store", "sqlite:///a.db"]


def test_the_environments_standbys_are_folded_in_as_the_flag_unless_it_is_given() -> None:
    environ = {
        "ACP_SERVER_STORE": "postgresql://db1/acp",
        "ACP_SERVER_STORE_READ": "postgresql://db2/acp",
    }
    assert normalise([], environ, CWD).argv() == [
        "--store",
        "postgresql://db1/acp",
        "--store-read",
        "postgresql://db2/acp",
    ]
    given = normalise(["--store-read", "postgresql://db3/acp"], environ, CWD)
    assert given.argv() == [
        "--store",
        "postgresql://db1/acp",
        "--store-read",
        "postgresql://db3/acp",
    ]


def test_the_store_schemes_are_the_engines() -> None:
    assert frozenset(ENGINES) == STORE_SCHEMES


def test_a_store_url_without_its_slashes_is_passed_on_for_the_server_to_refuse() -> None:
    for store in ("sqlite:a.db", "SQLite:a.db", "postgresql:db", "file:dir"):
        assert normalise(["--store", store], {}, CWD).argv() == ["--store", store]
    assert normalise([], {"ACP_SERVER_STORE": "sqlite:a.db"}, CWD).argv() == [
        "--store",
        "sqlite:a.db",
    ]
    assert normalise(["--store", "dir:a"], {}, CWD).argv() == ["--store", f"{CWD}/dir:a"]


def test_a_flag_wins_over_the_environments_store() -> None:
    flags = normalise(["--store", "/s"], {"ACP_SERVER_SESSIONS_DIR": "/e"}, CWD)
    assert flags.argv() == ["--store", "/s"]


def test_the_replay_file_of_the_environment_is_folded_in_for_llm_replay_only() -> None:
    environ = {"ACP_REPLAY_FILE": "f.jsonl"}
    assert normalise([], environ, CWD).argv() == ["--replay", f"{CWD}/f.jsonl"]
    live = normalise(["--provider", "openai", "--model", "m"], environ, CWD)
    assert live.argv() == ["--provider", "openai", "--model", "m"]


def test_repeated_origins_are_a_set() -> None:
    one = normalise(["--allow-origin", "http://b", "--allow-origin", "http://a"], {}, CWD)
    other = normalise(["--allow-origin=http://a", "--allow-origin=http://b"], {}, CWD)
    assert one.key_text() == other.key_text()
    assert one.argv() == ["--allow-origin", "http://a", "--allow-origin", "http://b"]


def test_what_cannot_be_read_is_passed_on_in_order() -> None:
    flags = normalise(["--no-such", "--pace-ms=-1x", "--socket", "/x", "--mode"], {}, CWD)
    assert flags.unread == ("--no-such", "--socket", "/x", "--mode")
    assert flags.argv() == ["--pace-ms", "-1x", "--no-such", "--socket", "/x", "--mode"]


def test_an_ambiguous_prefix_is_no_flag() -> None:
    assert (resolve("--max"), resolve("--max-s"), resolve("--max-steps")) == (
        None,
        "--max-steps",
        "--max-steps",
    )


def test_the_server_gets_only_the_passed_variables() -> None:
    environ = {
        "PATH": "/bin",
        "HOME": "/home/me",
        "LC_ALL": "C",
        "XDG_DATA_HOME": "/d",
        "ACP_SERVER_STORE": "/s",
        "OPENAI_API_KEY": "k",
        "MY_KEY": "m",
        "AWS_SECRET_ACCESS_KEY": "no",
        "DISPLAY": ":0",
    }
    assert server_environment(environ, ("MY_KEY",)) == {
        "PATH": "/bin",
        "HOME": "/home/me",
        "LC_ALL": "C",
        "XDG_DATA_HOME": "/d",
        "ACP_SERVER_STORE": "/s",
        "OPENAI_API_KEY": "k",
        "MY_KEY": "m",
    }
