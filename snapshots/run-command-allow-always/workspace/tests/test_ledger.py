from pathlib import Path

from tally.ledger import read_entries, total


def test_total_by_category(tmp_path: Path):
    ledger = tmp_path / "l.csv"
    ledger.write_text("date,category,amount\n2024-03-01,Groceries,12.50\n2024-03-02,rent,900\n2024-03-03,groceries,\n")
    entries = read_entries(ledger)
    assert total(entries, "groceries") == 1250
    assert total(entries) == 91250
