"""The bare `serve`'s provider reads the bundled recording at the first model call, and a session
bound before then streams what a provider that read it at once streams."""

from __future__ import annotations

import pytest

from acp_server.core.events import StreamChunk
from acp_server.providers.base import ModelRequest
from acp_server.providers.bundled import BundledDemoProvider
from acp_server.providers.replay import ReplayProvider, bundled_demo_fixture

pytestmark = pytest.mark.anyio


async def first_call(provider: BundledDemoProvider | ReplayProvider) -> list[StreamChunk]:
    request = ModelRequest(session_id="s", messages=[], tools=[])
    return [chunk async for chunk in provider.stream(request)]


async def test_a_session_bound_before_the_recording_is_read_streams_its_recording() -> None:
    direct = ReplayProvider.from_path(bundled_demo_fixture(), None, 0)
    direct.bind_session("s", parent_session_id=None, model_calls=0)
    lazy = BundledDemoProvider(0)
    lazy.bind_session("s", parent_session_id=None, model_calls=0)

    chunks = await first_call(lazy)

    assert chunks == await first_call(direct)
    assert chunks


async def test_binding_a_session_again_before_the_read_keeps_the_newest_binding() -> None:
    direct = ReplayProvider.from_path(bundled_demo_fixture(), None, 0)
    direct.bind_session("s", parent_session_id=None, model_calls=1)
    lazy = BundledDemoProvider(0)
    lazy.bind_session("s", parent_session_id=None, model_calls=0)
    lazy.bind_session("s", parent_session_id=None, model_calls=1)

    assert await first_call(lazy) == await first_call(direct)
