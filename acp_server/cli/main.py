"""The `acp-server` command line (SPEC 8): parse it, then run the command it names.

Each command lives in a module of its own, imported when chosen, so that `acp-server serve`
starts without loading what it does not use: `serve` (the default), `demo`, `log`, `store`,
`sessions`, `fixture`, and `login` for `login` and `logout`. The parser is `parser`'s. Bad flags
and unusable paths exit with status 2 and one line on stderr (argparse's own behaviour, kept to
one line); the other statuses are `outcome`'s, and a command whose reader closes its output
(`| head`) ends there without a word.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..startup.handshake import LOGIN_ENV
from .parser import COMMAND_NAMES, build_parser, with_default_command


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (None: this process's own, which `serve` may start again
    without the API keys in its environment); its exit status."""
    if os.environ.get(LOGIN_ENV) == "1":
        # A client's terminal auth method (SPEC 4.4): the user's own command line, plus this.
        from .login import run_terminal_login

        return run_terminal_login(sys.argv[1:] if argv is None else argv)
    arguments = with_default_command(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(arguments[0] if arguments[0] in COMMAND_NAMES else None)
    args = parser.parse_args(arguments)
    if args.command == "serve":
        from .serve import run_serve

        return run_serve(parser, args, may_reexec=argv is None)
    try:
        status = _run_command(parser, args)
        sys.stdout.flush()  # what is still buffered may find the reader gone too
    except BrokenPipeError:
        from .outcome import reader_gone

        return reader_gone()
    return status


def _run_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run a command other than `serve`; its exit status."""
    if args.command == "demo":
        from .demo import run_demo

        return run_demo(keep=args.keep)
    if args.command in ("login", "logout"):
        from .login import run_login, run_logout

        if args.command == "login":
            return run_login(args.provider, args.base_url)
        return run_logout(args.provider, args.base_url)
    if args.command == "log":
        from .log import run_log

        return run_log(args.action, args.path, args.store)
    if args.command == "store":
        from .store import run_store_command

        urls = [args.source] + ([args.target] if args.action == "copy" else [])
        return run_store_command(args.action, urls, getattr(args, "sessions", None))
    if args.command == "sessions":
        from .sessions import run_sessions_list

        return run_sessions_list(args.store, as_json=args.json)
    if args.command == "fixture":
        from .fixture import run_fixture_command

        return run_fixture_command(args)
    parser.print_help(sys.stderr)
    return 2
