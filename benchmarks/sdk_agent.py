"""A minimal ACP agent built on the official `agent-client-protocol` SDK, for `benchmarks/rpc.py`.

It answers `initialize` the way acp-server does (protocol version 1, the same capabilities and
agent info) and `session/list` with an empty page, so that the benchmark measures the two JSON-RPC
stacks on the same cheap requests. Run as `python benchmarks/sdk_agent.py`; it serves stdio.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import InitializeResponse, run_agent
from acp.schema import (
    AgentCapabilities,
    Implementation,
    ListSessionsResponse,
    PromptCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
)


class BenchAgent:
    """Only the methods the benchmark calls; the SDK answers -32601 for the rest."""

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=1,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                ),
            ),
            agent_info=Implementation(name="sdk-bench-agent", version="0"),
            auth_methods=[],
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        return ListSessionsResponse(sessions=[])


def main() -> None:
    asyncio.run(run_agent(BenchAgent()))  # type: ignore[arg-type]  # implements only the Agent methods the benchmark uses


if __name__ == "__main__":
    main()
