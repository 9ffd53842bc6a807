from tally.money import format_cents, parse_amount


def test_parse_amount():
    assert parse_amount("12.5") == 1250
    assert parse_amount("1,234.05") == 123405
    assert parse_amount("-3.20") == -320


def test_format_cents():
    assert format_cents(1250) == "12.50"
    assert format_cents(5) == "0.05"


def test_format_negative():
    assert format_cents(-50) == "-0.50"
