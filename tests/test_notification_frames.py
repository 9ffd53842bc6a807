"""`notification_frames` as stdio writes them (`line_batches`): the frames of many notifications
in a few buffers, the same bytes `notification_frame` gives one at a time, each a line."""

from __future__ import annotations

import json

from acp_server.jsonrpc.wire import notification_frame, notification_frames
from acp_server.transports.stdio import FRAMES_BATCH, line_batches


def test_many_notifications_are_the_frames_of_each_in_order_across_buffers() -> None:
    params = [{"n": n, "text": "über " * (n % 7000)} for n in range(400)]

    buffers = list(line_batches(notification_frames("session/update", params)))

    assert b"".join(buffers) == b"".join(
        notification_frame("session/update", p) + b"\n" for p in params
    )
    assert len(buffers) > 1
    assert all(len(b) < FRAMES_BATCH + 50_000 for b in buffers)  # a buffer ends after a frame
    assert all(b.endswith(b"}\n") for b in buffers)
    first = json.loads(buffers[0].split(b"\n")[0])
    assert first == {"jsonrpc": "2.0", "method": "session/update", "params": params[0]}


def test_no_notifications_are_no_buffers() -> None:
    assert list(line_batches(notification_frames("session/update", []))) == []
