"""Reading ledger rows from CSV."""

import csv
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from .money import parse_amount


@dataclass(frozen=True)
class Entry:
    day: date
    category: str
    amount_cents: int


def read_entries(path: Path) -> list[Entry]:
    entries = []
    with path.open(newline="") as file:
        for row in csv.DictReader(file):
            if not row["amount"].strip():
                continue
            entries.append(
                Entry(date.fromisoformat(row["date"]), row["category"].strip().lower(), parse_amount(row["amount"]))
            )
    return entries


def total(entries: list[Entry], category: str | None = None) -> int:
    return sum(e.amount_cents for e in entries if category is None or e.category == category)
