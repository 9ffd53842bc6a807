"""What every command's parser is made of: the parser class that keeps an error to one line,
and the argument types more than one command takes.

An argument type turns the text into its value or raises `argparse.ArgumentTypeError`, which
argparse reports as `argument FLAG: <message>`, status 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn, TypeAlias


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one clear line, status 2, no usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


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
