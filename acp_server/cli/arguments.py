"""What every command's parser is made of: the parser class that keeps an error to one line,
and the argument types more than one command takes.

An argument type turns the text into its value or raises `argparse.ArgumentTypeError`, which
argparse reports as `argument FLAG: <message>`, status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeAlias

EXIT_STATUS: dict[str, str] = {
    "serve": "Exit status: 0 when the input ends; 2 when it could not run (a bad flag, a store "
    "it cannot use), said in one line on stderr.",
    "checks": "Exit status: 0 when all is well; 1 when it found problems (a log or session that "
    "fails a check, a session it could not copy); 2 when it could not run (a bad argument, a "
    "store it cannot open or reach, a log it cannot read), said in one line on stderr; 141, "
    "without a word, when the reader closes its output (| head).",
    "lists": "Exit status: 0 when it listed the sessions; 2 when it could not run (a bad "
    "argument, a store it cannot open or reach), said in one line on stderr; 141, without a "
    "word, when the reader closes its output (| head).",
}
"""The exit status convention, the same for every command, as each command's help states it:
1 for problems found, 2 for a command that could not run."""


class Parser(argparse.ArgumentParser):
    late_epilog: Callable[[], str] | None = None
    """Help text after the arguments, made when the help is shown (what it says, such as where
    the sessions are, costs more to find than a command line that does not ask for help)."""

    def error(self, message: str) -> NoReturn:  # one clear line, status 2, no usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")

    def format_help(self) -> str:
        if self.late_epilog is not None:
            self.epilog = self.late_epilog()
        return super().format_help()


Commands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""Where each command's parser is added."""


def path(text: str) -> Path:
    """A path argument; an empty one is refused (`Path("")` would quietly mean `.`)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text)


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value
