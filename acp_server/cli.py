"""The `acp-server` command line (SPEC 8).

Parsing only; each subcommand lives in its own module and is imported when chosen, so that
`acp-server serve` starts without loading what it does not use. `serve` is the default: a bare
`acp-server`, or one whose first argument is a flag, serves. Bad flags and unusable paths exit
with status 2 and one line on stderr (argparse's own behaviour, kept to one line).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from . import __version__

COMMANDS = ("serve", "demo", "log")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one clear line, status 2, no usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _log_level(text: str) -> str:
    level = text.lower()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(LOG_LEVELS)})")
    return level


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="acp-server",
        description="An Agent Client Protocol agent over stdio, with lossless session logs. "
        "With no command, or flags only, it serves (see `acp-server serve --help`).",
    )
    parser.add_argument("--version", action="version", version=f"acp-server {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    serve = commands.add_parser(
        "serve",
        help="serve ACP over stdio (the default)",
        description="Serve the Agent Client Protocol over stdin/stdout: one JSON-RPC message per "
        "line. Protocol frames only on stdout; logs on stderr. Exits 0 at end of input.",
    )
    serve.add_argument(
        "--sessions-dir",
        metavar="DIR",
        type=Path,
        help="root of the session logs (default: $ACP_SERVER_SESSIONS_DIR, else sessions/ in "
        "the platform's user data directory)",
    )
    serve.add_argument(
        "--replay",
        metavar="FIXTURE",
        type=Path,
        help="recorded session to replay as the model: a session.jsonl or a scenario directory "
        "(default: $ACP_REPLAY_FILE, else the bundled demo recording)",
    )
    serve.add_argument(
        "--replay-override",
        metavar="FILE",
        type=Path,
        help="a replay.override.json to use instead of the one beside the fixture",
    )
    serve.add_argument(
        "--pace-ms", metavar="N", type=_non_negative_int, default=0, help="delay each replayed chunk by N ms (default 0)"
    )
    serve.add_argument(
        "--max-steps", metavar="N", type=_positive_int, default=50, help="model calls allowed per turn (default 50)"
    )
    serve.add_argument(
        "--compression",
        choices=("none", "zstd"),
        default="none",
        help="write new logs as plain JSONL (none, the default) or as Zstandard frames (zstd)",
    )
    serve.add_argument(
        "--no-pack", action="store_true", help="write one event per line instead of packed chunk rows (diagnostics)"
    )
    serve.add_argument(
        "--log-level",
        metavar="LEVEL",
        type=_log_level,
        default="warning",
        help=f"stderr log level: {', '.join(LOG_LEVELS)} (default warning)",
    )
    serve.add_argument(
        "--max-line-bytes",
        metavar="N",
        type=_positive_int,
        default=64 * 1024 * 1024,
        help="longest accepted input line; a longer one is answered with an error and skipped "
        "(default 67108864, 64 MiB)",
    )
    commands.add_parser("demo", help="run a recorded session end to end and show what it stored")
    log = commands.add_parser(
        "log",
        help="inspect a session log: stats, verify or cat",
        description="Inspect a session log. PATH is a session directory, a session.jsonl or a "
        "session.jsonl.zst.",
    )
    actions = log.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser, required=True)
    for action, text in (
        ("stats", "events by type, chunk rows, bytes packed vs unpacked"),
        ("verify", "check every rule of the log format; exit status 1 with every problem found"),
        ("cat", "print the logical events as JSON lines (chunk rows expanded)"),
    ):
        sub = actions.add_parser(action, help=text, description=text)
        sub.add_argument("path", metavar="PATH", type=Path, help="a session directory or a log file")
    return parser


def _with_default_command(argv: list[str]) -> list[str]:
    """`acp-server` and `acp-server --flag ...` mean `acp-server serve ...`."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        return ["serve", *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_with_default_command(list(sys.argv[1:] if argv is None else argv)))
    if args.command == "demo":
        from .demo import run_demo

        return run_demo()
    if args.command == "serve":
        return _serve(parser, args)
    if args.command == "log":
        from .log_command import run_log_command

        return run_log_command(args.action, args.path)
    parser.print_help(sys.stderr)
    return 2


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .server.config import REPLAY_FILE_ENV, ServeConfig, default_sessions_dir

    def fail(message: str) -> NoReturn:
        parser.exit(2, f"acp-server serve: error: {message}\n")

    sessions_dir = args.sessions_dir if args.sessions_dir is not None else default_sessions_dir()
    if sessions_dir.exists() and not sessions_dir.is_dir():
        return fail(f"--sessions-dir: not a directory: {sessions_dir}")
    replay = args.replay
    if replay is None and os.environ.get(REPLAY_FILE_ENV):
        replay = Path(os.environ[REPLAY_FILE_ENV])
    if replay is not None and not replay.exists():
        return fail(f"--replay: no such file or directory: {replay}")
    if args.replay_override is not None and not args.replay_override.is_file():
        return fail(f"--replay-override: no such file: {args.replay_override}")
    config = ServeConfig(
        sessions_dir=sessions_dir,
        replay=replay,
        replay_override=args.replay_override,
        pace_ms=args.pace_ms,
        max_steps=args.max_steps,
        compression=args.compression,
        pack=not args.no_pack,
        log_level=args.log_level,
        max_line_bytes=args.max_line_bytes,
    )
    from .server.app import run_server

    return run_server(config)
