"""Amounts of money as integer cents."""


def parse_amount(text: str) -> int:
    text = text.strip().replace(",", "")
    negative = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    cents = int(whole or "0") * 100 + int((frac + "00")[:2])
    return -cents if negative else cents


def format_cents(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"
