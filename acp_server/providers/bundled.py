"""`llm-replay` as the registry builds it: over `--replay`, or over the demo recording that
ships inside the package, which is read at the first model call.

This module imports only the provider seam: `acp_server.providers.replay` (and the fixture
parser behind it) is imported when a recording is read, so that a bare `acp-server serve`
answers its client before it has paid for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..core.events import StreamChunk
    from .base import ModelRequest, Provider
    from .replay import ReplayProvider
    from .settings import ProviderSettings


def from_settings(settings: ProviderSettings) -> Provider:
    """The provider `--provider llm-replay` names (`acp_server.providers.registry`): a
    `--replay` or `--replay-override` is loaded at once (SPEC 8 wants a path the user gave
    refused at start), the bundled demo at the first model call."""
    if settings.replay is None and settings.replay_override is None:
        return BundledDemoProvider(settings.pace_ms)
    from .replay import ReplayProvider, bundled_demo_fixture

    fixture = settings.replay if settings.replay is not None else bundled_demo_fixture()
    return ReplayProvider.from_path(fixture, settings.replay_override, settings.pace_ms)


class BundledDemoProvider:
    """`llm-replay` over the demo recording that ships inside the package, read at the first
    model call.

    It is what a bare `acp-server serve` replays, so reading and parsing it before the first
    answer, or before a `session/load`'s replay, would delay them; being part of the package, it
    is not a path the user gave, which SPEC 8 wants refused at start (a `--replay` or
    `--replay-override` is loaded at once). Sessions bound before then are bound once it is read.
    """

    name = "llm-replay"

    def __init__(self, pace_ms: int) -> None:
        self.pace_ms = pace_ms
        self._loaded: ReplayProvider | None = None
        self._bindings: dict[str, _Binding] = {}
        """Sessions bound before the recording was read, in the order they were bound."""

    def _provider(self) -> ReplayProvider:
        if self._loaded is None:
            from .replay import ReplayProvider, bundled_demo_fixture

            loaded = ReplayProvider.from_path(bundled_demo_fixture(), None, self.pace_ms)
            for session_id, binding in self._bindings.items():
                loaded.bind_session(
                    session_id,
                    parent_session_id=binding.parent_session_id,
                    model_calls=binding.model_calls,
                    cwd=binding.cwd,
                )
            self._bindings.clear()
            self._loaded = loaded
        return self._loaded

    def bind_session(
        self,
        session_id: str,
        *,
        parent_session_id: str | None,
        model_calls: int,
        cwd: str | None = None,
    ) -> None:
        if self._loaded is None:
            self._bindings.pop(session_id, None)  # a binding again counts as the newest
            self._bindings[session_id] = _Binding(parent_session_id, model_calls, cwd)
            return
        self._loaded.bind_session(
            session_id, parent_session_id=parent_session_id, model_calls=model_calls, cwd=cwd
        )

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        return self._provider().stream(request)


class _Binding(NamedTuple):
    parent_session_id: str | None
    model_calls: int
    cwd: str | None


__all__ = ["BundledDemoProvider", "from_settings"]
