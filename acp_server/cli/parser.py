"""The `acp-server` command line's parser: the top level, and each command's arguments.

`serve`'s many flags are in `serve_flags`; the other commands' few are here, one function
each. `serve` is the default: a bare `acp-server`, or one whose first argument is a flag, serves
(`with_default_command`). A command line that names its command gets a parser of that command
alone (`build_parser`), so that starting the server makes no other command's parser.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Final

from .. import __version__
from ..providers.names import KEY_VARIABLES
from .arguments import EXIT_STATUS, Commands, Parser, path
from .serve_flags import add_serve


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with `command`, one of `COMMAND_NAMES`, only that command's
    parser is made beside the top level's. A command line that names its command needs no
    other, and making the others' took a few milliseconds of every start."""
    parser = Parser(
        prog="acp-server",
        description="An Agent Client Protocol agent over stdio, with lossless session logs. "
        "With no command, or flags only, it serves (see `acp-server serve --help`); "
        "`acp-server attach [serve flags]` relays to the user's shared server for those flags, "
        "started when none runs (see `acp-server attach --help`).",
    )
    parser.add_argument("--version", action="version", version=f"acp-server {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, add in _COMMANDS.items():
        if command is None or name == command:
            add(commands)
    return parser


def with_default_command(argv: list[str]) -> list[str]:
    """`acp-server` and `acp-server --flag ...` mean `acp-server serve ...`."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        return ["serve", *argv]
    return argv


def _add_login(commands: Commands) -> None:
    login = commands.add_parser(
        "login",
        help="store a provider's API key (read without echo)",
        description="Read the API key from the terminal without showing it and store it for "
        "one provider in the platform's config directory, readable by you alone; that provider "
        "uses it when its environment variable is unset, and no other provider ever reads it. "
        "A client's terminal auth method runs this with the server's own --provider and "
        "--base-url.",
    )
    _add_key_name(login, "store the key for", "openai")


def _add_logout(commands: Commands) -> None:
    logout = commands.add_parser(
        "logout",
        help="remove stored API keys",
        description="Remove the API key `acp-server login` stored for one provider, or every "
        "stored key when no --provider is given.",
    )
    _add_key_name(logout, "remove the key of", None)


def _add_key_name(parser: Parser, verb: str, default: str | None) -> None:
    """`--provider` and `--base-url`: which stored key (`providers.credentials.KeyName`)."""
    live = [name for name, variable in KEY_VARIABLES.items() if variable]
    parser.add_argument(
        "--provider",
        choices=live,
        default=default,
        help=f"{verb} this provider" + (f" (default: {default})" if default else ""),
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help=f"{verb} the provider at this API root, when it is not the provider's default"
        + (" (a key stored so is sent there alone)" if default else ""),
    )


def _add_demo(commands: Commands) -> None:
    demo = commands.add_parser(
        "demo",
        help="run a recorded session end to end and show what it stored",
        description="Spawn the real server, drive the bundled recording through it as an editor "
        "would, load the session in a fresh process, page its history and show the log's figures.",
    )
    demo.add_argument(
        "--keep",
        metavar="DIR",
        type=path,
        help="keep the workspace and the session log in DIR (an empty directory)",
    )


def _add_log(commands: Commands) -> None:
    log = commands.add_parser(
        "log",
        help="inspect a session log: stats, verify or cat",
        description="Inspect a session log. PATH is a session directory, a session.jsonl or a "
        "session.jsonl.zst; or a session id, read from --store URL, else from the store serve "
        "would use (see `acp-server serve --help`).",
        epilog=EXIT_STATUS["checks"],
    )
    actions = log.add_subparsers(
        dest="action", metavar="ACTION", parser_class=Parser, required=True
    )
    for action, text in (
        ("stats", "events by type, chunk rows, bytes packed vs unpacked"),
        ("verify", "check every rule of the log format; exit status 1 with every problem found"),
        ("cat", "print the logical events as JSON lines (chunk rows expanded)"),
    ):
        sub = actions.add_parser(action, help=text, description=text, epilog=EXIT_STATUS["checks"])
        sub.add_argument(
            "path",
            metavar="PATH",
            type=path,
            help="a session directory or a log file; or a session id (always, with --store)",
        )
        sub.add_argument(
            "--store",
            metavar="URL",
            help="read the session PATH names from this store (a directory, file:///abs/dir, "
            "sqlite:///abs/path.db or postgresql://...; default: the store serve would use, "
            "for a PATH that is no file)",
        )


def _add_store(commands: Commands) -> None:
    store = commands.add_parser(
        "store",
        help="copy sessions between stores, verify a store, or set one up",
        description="Work with session stores (a directory, file:///abs/dir, "
        "sqlite:///abs/path.db or postgresql://user@host:port/db). verify and init without a "
        "URL work on the store serve would use (see `acp-server serve --help`).",
        epilog=EXIT_STATUS["checks"],
    )
    store_actions = store.add_subparsers(
        dest="action", metavar="ACTION", parser_class=Parser, required=True
    )
    copy = store_actions.add_parser(
        "copy",
        help="copy sessions from SRC to DST, record for record",
        description="Copy sessions from the store SRC to the store DST, record for record. A "
        "session DST already holds is left as it is when it is the same session and refused "
        "when it is another one of the same id.",
        epilog=EXIT_STATUS["checks"],
    )
    copy.add_argument("source", metavar="SRC", help="the store to copy from")
    copy.add_argument("target", metavar="DST", help="the store to copy to")
    copy.add_argument(
        "--session",
        metavar="ID",
        action="append",
        dest="sessions",
        help="copy only this session (repeat for more; default: every session)",
    )
    verify = store_actions.add_parser(
        "verify",
        help="check every session of a store as log verify does",
        description="Check every session of a store as `acp-server log verify` checks one.",
        epilog=EXIT_STATUS["checks"],
    )
    verify.add_argument(
        "source", metavar="URL", nargs="?", help="the store to check (default: serve's)"
    )
    init = store_actions.add_parser(
        "init",
        help="create a database store's tables",
        description="Create the tables of the store URL names (a database is also set up on "
        "first use; a directory is made); a store of another schema version is refused.",
        epilog=EXIT_STATUS["checks"],
    )
    init.add_argument(
        "source", metavar="URL", nargs="?", help="the store to set up (default: serve's)"
    )


def _add_sessions(commands: Commands) -> None:
    sessions = commands.add_parser(
        "sessions",
        help="list the sessions of a store",
        description="Work with the sessions of a store (default: the store serve would use; "
        "see `acp-server serve --help`).",
        epilog=EXIT_STATUS["lists"],
    )
    actions = sessions.add_subparsers(
        dest="action", metavar="ACTION", parser_class=Parser, required=True
    )
    listing = actions.add_parser(
        "list",
        help="list the sessions, newest first",
        description="List the sessions of a store, the most recently active first: id, title, "
        "working directory, last activity (UTC) and size (bytes where the store keeps the "
        "session; a database's sessions are read whole to count them).",
        epilog=EXIT_STATUS["lists"],
    )
    listing.add_argument(
        "--store",
        metavar="URL",
        help="the store to list (a directory, file:///abs/dir, sqlite:///abs/path.db or "
        "postgresql://...; default: the store serve would use)",
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="print a JSON array of {id, title, cwd, createdAt, lastActivity, size} instead",
    )


def _add_fixture(commands: Commands) -> None:
    fixture = commands.add_parser(
        "fixture",
        help="turn a recorded session into a replay fixture",
        description="Work with llm-replay fixtures (snapshot scenarios' session.jsonl files).",
    )
    fixture_actions = fixture.add_subparsers(
        dest="action", metavar="ACTION", parser_class=Parser, required=True
    )
    export = fixture_actions.add_parser(
        "export",
        help="write a session's log (and its subagents' logs) as a scenario's fixture",
        description="Write SESSION_DIR's log as SCENARIO_DIR/session.jsonl (canonical packed, "
        "projected form), its subagents' logs as session.1.jsonl, session.2.jsonl, ... (found under "
        "the same sessions root), and a replay.override.json for model calls that failed or were "
        "cancelled. Session ids become <session-1>, <session-2>, ...; the session's cwd becomes "
        "<workspace>; times become relative to the first event. Other fixture files in "
        "SCENARIO_DIR (stale children, an old override) are removed; input.json and workspace/ "
        "are left alone.",
    )
    export.add_argument(
        "session_dir",
        metavar="SESSION_DIR",
        type=path,
        help="a session directory (<sessions root>/<id>)",
    )
    export.add_argument(
        "scenario_dir",
        metavar="SCENARIO_DIR",
        type=path,
        help="the scenario directory to write (created if missing)",
    )
    export.add_argument(
        "--zero-times",
        action="store_true",
        help="set every time to 0, as snapshot scenarios store them (default: keep the gaps between chunks)",
    )
    export.add_argument(
        "--keep-cwd",
        action="store_true",
        help="keep the session's cwd as it was instead of <workspace>",
    )


_COMMANDS: Final[dict[str, Callable[[Commands], None]]] = {
    "serve": add_serve,
    "login": _add_login,
    "logout": _add_logout,
    "demo": _add_demo,
    "log": _add_log,
    "store": _add_store,
    "sessions": _add_sessions,
    "fixture": _add_fixture,
}
"""Each command's parser, in the order `acp-server --help` lists them."""
COMMAND_NAMES: Final = frozenset(_COMMANDS)
