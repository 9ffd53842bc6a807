"""The `tally` command line."""

import argparse
from pathlib import Path

from .ledger import read_entries, total
from .money import format_cents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tally")
    commands = parser.add_subparsers(dest="command", required=True)
    summing = commands.add_parser("sum", help="print the total of a ledger")
    summing.add_argument("ledger", type=Path)
    summing.add_argument("--category")
    args = parser.parse_args(argv)
    entries = read_entries(args.ledger)
    print(format_cents(total(entries, args.category)))
    return 0
