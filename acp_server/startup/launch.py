"""The `acp-server` command's entry point: for the stdio server, the handshake starts first.

An editor waits for the `initialize` answer each time it spawns the agent. When the command line
asks for the stdio server (no command or `serve`, without `--listen`, `--help`, `--version`, a
live `--provider` or a provider's key variable set, each of which may start the process again,
to take a key out of the environment) over a store that is plainly usable (`store_location`: a
store that is not is checked in full, and refused, before any answer), the protocol streams are
claimed and `acp_server.startup.handshake` starts answering the first `initialize` before the
rest of the program is even imported, told whether the provider the command line names needs a
key (its auth methods depend on it). `attach` is the relay to a shared server
(`acp_server.startup.attach`), which imports next to nothing; the shared server itself (`serve
--socket`) serves no stdio. Everything else, the command line included, is
`acp_server.cli`'s.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # `typing` and `collections` cost milliseconds of every start
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "attach":
        from .attach import main as attach

        return attach(args[1:])
    provider = early_provider(args, os.environ)
    if provider is not None and store_ready_early(args, os.environ):
        from ..providers.names import takes_a_key
        from ..transports.stdio_fds import claim_stdio
        from . import handshake

        try:
            fds = claim_stdio()
        except OSError:
            pass  # no usable stdio: the server says so, in its own words, once it starts
        else:
            handshake.start(fds.input, fds.output, key_needed=takes_a_key(provider))
    from ..cli.main import main as cli_main

    return cli_main(argv)


def serves_stdio_early(args: list[str], environ: os._Environ[str] | dict[str, str]) -> bool:
    """Whether `args` run the stdio server in this very process, with a provider that takes
    no key (llm-replay)."""
    return early_provider(args, environ) is not None


def early_provider(args: list[str], environ: os._Environ[str] | dict[str, str]) -> str | None:
    """The provider `args` name (llm-replay unless `--provider` says otherwise), when they run
    the stdio server in this very process with a provider that takes no key; else None."""
    from ..providers.names import KEY_VARIABLES, REPLAY, key_variables
    from .handshake import LOGIN_ENV

    if environ.get(LOGIN_ENV) == "1":
        return None  # the terminal auth method: this process logs in
    if any(environ.get(name) for name in key_variables()):
        return None  # started again without it first: what this one read would be lost
    if args and args[0] == "serve":
        args = args[1:]
    elif args and not args[0].startswith("-"):
        return None  # another command
    provider = REPLAY
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name == "-h" or _abbreviates(name, "--help", "--version", "--listen", "--socket"):
            return None
        if _abbreviates(name, "--provider"):
            given = value if equals else (args[index + 1] if index + 1 < len(args) else "")
            if given not in KEY_VARIABLES or KEY_VARIABLES[given]:
                return None
            provider = given
    return provider


def store_ready_early(args: list[str], environ: os._Environ[str] | dict[str, str]) -> bool:
    """Whether the store the stdio server `args` run will use is ready for an early answer
    (`store_location.ready_early`: its directory made if need be); False sends the start the
    long way, where the store is checked in full, and refused, before any answer."""
    from .store_location import choose_store, ready_early

    named = _store_flags(args)
    if named is None:
        return False
    try:
        return ready_early(choose_store(*named, environ))
    except ValueError:
        return False  # both flags: the command line refuses them


def _store_flags(args: list[str]) -> tuple[str | None, str | None] | None:
    """The values of `--store` and `--sessions-dir` in `args` (None: not given), the last of
    each as argparse takes it; None when a flag is not plain to read (an ambiguous prefix, a
    flag without its value)."""
    values: dict[str, str] = {}
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        flags = [flag for flag in ("--store", "--sessions-dir") if _abbreviates(name, flag)]
        if not flags:
            continue
        if len(flags) > 1 or (not equals and index + 1 >= len(args)):
            return None
        values[flags[0]] = value if equals else args[index + 1]
    return values.get("--store"), values.get("--sessions-dir")


def _abbreviates(name: str, *flags: str) -> bool:
    """Whether argparse may read `name` as one of `flags` (it takes unambiguous prefixes)."""
    return len(name) > 2 and any(flag.startswith(name) for flag in flags)
