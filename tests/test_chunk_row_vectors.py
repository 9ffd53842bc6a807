"""The shared decoder vectors (`tests/vectors/chunk_rows.json`) are what the Python codec does.

The browser client is tested on the same file (`tests/js/decode.test.mjs`), so these tests are
what keeps the two decoders equal: the file must be exactly what `tests/chunk_row_vectors.py`
makes, and the Python codec must give exactly its outputs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from chunk_row_vectors import VECTORS, as_json, build, render

from acp_server.client.journal import Journal
from acp_server.core.events import KNOWN_EVENT_TYPES
from acp_server.core.history import HistoryProtocolError, expand_history_records

FILE: dict[str, Any] = json.loads(VECTORS.read_text(encoding="utf-8"))


def test_the_vector_file_is_what_the_generator_makes() -> None:
    assert VECTORS.read_text(encoding="utf-8") == render(build()), (
        "regenerate it: python tests/chunk_row_vectors.py"
    )


def test_the_known_event_types_are_the_codec_s() -> None:
    assert FILE["knownEventTypes"] == sorted(KNOWN_EVENT_TYPES)


@pytest.mark.parametrize(
    "vector", FILE["decodes"] + FILE["beyondJavaScript"], ids=lambda vector: vector["name"]
)
def test_the_python_codec_decodes_each_vector_to_its_exact_events(vector: dict[str, Any]) -> None:
    assert as_json(expand_history_records(vector["records"])) == vector["events"]


@pytest.mark.parametrize("vector", FILE["refuses"], ids=lambda vector: vector["name"])
def test_the_python_codec_refuses_each_malformed_vector_with_its_message(
    vector: dict[str, Any],
) -> None:
    with pytest.raises(HistoryProtocolError) as raised:
        expand_history_records(vector["records"])
    assert str(raised.value) == vector["error"]


@pytest.mark.parametrize("vector", FILE["paged"], ids=lambda vector: vector["name"])
def test_a_journal_of_the_first_page_with_every_older_page_prepended_holds_the_log(
    vector: dict[str, Any],
) -> None:
    first, *older = vector["pages"]
    journal = Journal.from_page(first["records"], first["hasMore"])
    for page in older:
        journal.prepend(page["records"], page["hasMore"])
    assert as_json(list(journal.events)) == vector["events"]
    assert journal.has_older is False
