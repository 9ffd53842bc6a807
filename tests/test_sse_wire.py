"""Server-sent event framing from raw bytes (`SseDecoder.feed`), as both HTTP providers read it.

The same body gives the same events whole, one byte at a time, and cut at every point; every
line ending the WHATWG framing allows ends a line; an event longer than the bound fails.
"""

from __future__ import annotations

import pytest

from acp_server.providers.base import ProviderError
from acp_server.providers.wire import SseDecoder

BODY = (
    b'event: message_start\r\ndata: {"a":1}\r\n\r\n'
    b": a comment\n"
    b"id: 7\nretry: 10\n"
    b"data: first\ndata:second\ndata\n\n"
    b"data: caf\xc3\xa9\r\r"
    b"data: no blank line at the end"
)
EVENTS = [b'{"a":1}', b"first\nsecond\n", "café".encode()]
TAIL = b"no blank line at the end"


def feed_all(pieces: list[bytes]) -> tuple[list[bytes], bytes | None]:
    decoder = SseDecoder()
    events: list[bytes] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    return events, decoder.end_bytes()


def test_a_whole_body_gives_its_events_and_the_unterminated_last_one() -> None:
    assert feed_all([BODY]) == (EVENTS, TAIL)


def test_one_byte_at_a_time_gives_the_same_events() -> None:
    assert feed_all([BODY[i : i + 1] for i in range(len(BODY))]) == (EVENTS, TAIL)


def test_a_body_cut_in_two_anywhere_gives_the_same_events() -> None:
    for cut in range(len(BODY) + 1):
        assert feed_all([BODY[:cut], BODY[cut:]]) == (EVENTS, TAIL), cut


def test_a_body_that_ends_on_a_blank_line_leaves_no_tail() -> None:
    assert feed_all([b"data: x\n\n"]) == ([b"x"], None)


@pytest.mark.parametrize("body", [b"data: " + b"x" * 11 + b"\n", b"data: " + b"x" * 11])
def test_an_event_longer_than_the_bound_fails_the_stream(body: bytes) -> None:
    with pytest.raises(ProviderError) as caught:
        SseDecoder(max_chars=10).feed(body)
    assert (caught.value.message, caught.value.code) == (
        "a server-sent event is longer than 10 characters",
        "malformed-event",
    )
