"""The `acp-server` command line (SPEC 8).

Parsing only; each subcommand lives in its own module and is imported when chosen, so that
`acp-server serve` starts without loading what it does not use. Bad flags exit with status 2
and one line on stderr (argparse's own behaviour, kept to one line).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one clear line, status 2, no usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="acp-server",
        description="An Agent Client Protocol agent over stdio, with lossless session logs.",
    )
    parser.add_argument("--version", action="version", version=f"acp-server {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.add_parser("demo", help="run a recorded session end to end and show what it stored")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        return run_demo()
    build_parser().print_help(sys.stderr)
    return 2
