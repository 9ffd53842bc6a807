"""ACP v2's `initialize` read into what the port reports of the client (no process): a v2
client has no `fs/*` or `terminal/*` methods, asks for forms by `elicitation.form`, and takes
v2's own update kinds (notices, compaction, plan operations) without advertising them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from acp_server.agent.ports import ClientCapabilities as PortCapabilities
from acp_server.server.auth import NoAuth
from acp_server.server.port import ConnectionPort
from acp_server.server.protocol import (
    ClientCapabilities,
    ClientSessionCapabilities,
    Implementation,
    InitializeRequest,
)
from acp_server.server.v2.agent import V2Methods

V2_BASELINE = PortCapabilities(
    compaction=True, notices=True, plan_operations=True, shows_state=True
)
"""What every v2 client takes: its updates are v2's own kinds, with its state and whole
messages."""


class _Agent:
    """The part of `AcpAgent` that `initialize` and the port use."""

    def __init__(self) -> None:
        self.connection: Any = SimpleNamespace(protocol_version=2)
        self.auth = NoAuth()
        self.client_capabilities = ClientCapabilities()
        self.client_session_capabilities = ClientSessionCapabilities()
        self.client_info: Implementation | None = None


def initialized(params: dict[str, Any]) -> _Agent:
    agent = _Agent()
    request = msgspec.convert({"protocolVersion": 2, **params}, InitializeRequest)
    V2Methods(agent).initialize(request)
    return agent


def reported(params: dict[str, Any]) -> PortCapabilities:
    return ConnectionPort(initialized(params)).capabilities


def test_a_v2_client_without_capabilities_gets_v2s_baseline_and_no_client_methods() -> None:
    assert reported({"capabilities": {}}) == V2_BASELINE


def test_v1s_client_method_capabilities_mean_nothing_in_v2() -> None:
    params = {"capabilities": {"fs": {"readTextFile": True}, "terminal": True}}
    assert reported(params) == V2_BASELINE


def test_an_elicitation_form_object_is_form_elicitation() -> None:
    assert reported({"capabilities": {"elicitation": {"form": {}}}}).elicitation_form


@pytest.mark.parametrize("elicitation", [{"form": True}, {"url": {}}, {"form": None}, 7])
def test_anything_but_a_form_object_is_no_form_elicitation(elicitation: Any) -> None:
    assert not reported({"capabilities": {"elicitation": elicitation}}).elicitation_form


def test_the_clients_info_is_kept_and_a_malformed_one_is_none() -> None:
    kept = initialized({"info": {"name": "zed", "version": "1"}}).client_info
    assert kept is not None and (kept.name, kept.version) == ("zed", "1")
    assert initialized({"info": {"name": 3}}).client_info is None


def test_the_terminal_marker_is_remembered_as_an_object_only() -> None:
    assert initialized(
        {"capabilities": {"auth": {"terminal": {}}}}
    ).client_capabilities.auth.terminal
    assert not initialized(
        {"capabilities": {"auth": {"terminal": True}}}
    ).client_capabilities.auth.terminal
