"""The ACP conformance kit's v2 suite (`acp-tck --protocol-version 2`), row by row, against
`acp-server serve` with its default provider.

The kit cannot be installed here, so these checks send what it sends and assert what it asserts
(tests/v2_kit.py is its client). Each test names the kit's rows it stands for in its docstring.
Every test ends as the kit does, by closing stdin, and then holds the whole of stdout to the
kit's transport, schema and envelope checks (`KitClient.problems`): one JSON message per line,
every message valid under SDK 2.4.0's v2 schema, no answer to a notification.

A bare server answers every prompt at once with its explanation (`bundled.EXPLANATION`) and
`end_turn`; the cancel checks need a turn that lasts, so they run on a `--replay` fixture whose
model call hangs until cancelled (as a user would run the kit with `--replay`: docs/clients.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, write_fixture
from v2_kit import (
    MESSAGE_KINDS,
    UPDATE_KINDS,
    KitClient,
    Turn,
)

pytestmark = pytest.mark.process

HI = [{"type": "text", "text": "hi"}]
CAPABILITY_ROOT_KEYS = {"session", "auth", "providers", "nes", "positionEncoding", "_meta"}
"""The root keys of the pin's `AgentCapabilities`."""


class Agents:
    """Fresh agent processes for one test, as the kit spawns one per check."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root / "workspace"
        self.cwd.mkdir()
        self.clients: list[KitClient] = []

    def spawn(self, *flags: str) -> KitClient:
        client = KitClient(self.root / "sessions", *flags)
        self.clients.append(client)
        return client

    def session(self, *flags: str) -> tuple[KitClient, str]:
        """A fresh process past `initialize` and `session/new`."""
        client = self.spawn(*flags)
        assert client.initialize()["protocolVersion"] == 2
        return client, client.new_session(self.cwd)

    def hanging(self) -> tuple[KitClient, str]:
        """A session whose first model call streams a little, then waits to be cancelled."""
        hang = {
            "kind": "hang",
            "chunks": [
                {"type": "block-start", "index": 0, "blockType": "text"},
                {"type": "text-delta", "index": 0, "text": "Compilers read"},
            ],
        }
        scenario = Scenario(
            [("long", [Step(text="unused")])], override={"patches": [{"at": 0, "entry": hang}]}
        )
        fixture = write_fixture(self.root / "fixture", scenario)
        return self.session("--replay", str(fixture))


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    made = Agents(tmp_path)
    try:
        yield made
    finally:
        for client in made.clients:
            client.process.close()


def finish_clean(client: KitClient) -> None:
    """End the process as the kit does, and hold all it wrote to the kit's checks."""
    assert client.finish() == 0
    assert client.problems() == []


def assert_markers(value: Any, path: str = "capabilities") -> None:
    """Every capability below `value` is an object marker (or absent / null), never a bool."""
    assert isinstance(value, dict), f"{path} is {value!r}"
    for key, inner in value.items():
        if key == "_meta" or inner is None:
            continue
        if key == "positionEncoding":
            continue
        assert isinstance(inner, dict), f"{path}.{key} is {inner!r}, not an object"
        assert_markers(inner, f"{path}.{key}")


def assert_turn_ended(turn: Turn, stop_reason: str) -> None:
    """The kit's run_prompt and state rows: a receipt, `running` before the idle that ends the
    turn with `stop_reason`, every update for the prompted session and of a known kind."""
    assert "result" in turn.response, turn.response
    message_id = turn.response["result"]["messageId"]
    assert isinstance(message_id, str) and message_id
    assert "stopReason" not in turn.response["result"]
    states = [s["state"] for s in turn.states]
    assert states[0] == "running" and states[-1] == "idle", states
    assert turn.idle == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": stop_reason,
    }
    assert set(turn.kinds()) <= UPDATE_KINDS
    for update in turn.updates:
        if update["sessionUpdate"] in MESSAGE_KINDS:
            assert isinstance(update["messageId"], str) and update["messageId"], update


# -- initialize -------------------------------------------------------------------------------


def test_initialize_for_version_2_answers_version_2_with_the_agents_info(agents: Agents) -> None:
    """ACP-INIT-001, ACP-INIT-203: a result; `info.name` and `info.version` non-empty."""
    client = agents.spawn()
    result = client.initialize()
    assert result["protocolVersion"] == 2
    assert result["info"]["name"] == "acp-server"
    assert isinstance(result["info"]["version"], str) and result["info"]["version"]
    finish_clean(client)


@pytest.mark.parametrize("asked", [65535, 3])
def test_initialize_for_a_later_version_answers_2(agents: Agents, asked: int) -> None:
    """ACP-INIT-201, ACP-INIT-003: a version the agent does not know is answered with its
    latest, an integer (never the one asked, never an error)."""
    client = agents.spawn()
    version = client.initialize(protocolVersion=asked)["protocolVersion"]
    assert type(version) is int and version == 2
    finish_clean(client)


def test_initialize_for_version_1_answers_version_1(agents: Agents) -> None:
    """ACP-INIT-202: asking for 1 succeeds with 1 or 2 (never -32022): we speak v1, so 1."""
    client = agents.spawn()
    result = client.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert result["protocolVersion"] == 1
    assert client.finish() == 0


def test_capabilities_are_object_markers_and_extensions_sit_under_meta(agents: Agents) -> None:
    """ACP-INIT-204, ACP-EXT-202: every capability an object (never `true`), no root key
    outside the pin's `AgentCapabilities`; the history API under `_meta["acp-server"]`."""
    client = agents.spawn()
    capabilities = client.initialize()["capabilities"]
    assert_markers(capabilities)
    assert set(capabilities) <= CAPABILITY_ROOT_KEYS
    assert capabilities["session"]["prompt"] == {"image": {}, "audio": {}, "embeddedContext": {}}
    assert capabilities["_meta"]["acp-server"]["history"] == {
        "page": "session.page",
        "follow": "session.follow",
        "search": "session.search",
    }
    finish_clean(client)


def test_initialize_without_capabilities_is_answered(agents: Agents) -> None:
    """Older kit revisions (transport, jsonrpc, session-config) send no `capabilities` key."""
    client = agents.spawn()
    result = client.result(
        "initialize", {"protocolVersion": 2, "info": {"name": "acp-tck", "version": "0"}}
    )
    assert result["protocolVersion"] == 2
    finish_clean(client)


# -- JSON-RPC envelope, unknown methods, transport --------------------------------------------


def test_unknown_requests_are_answered_method_not_found(agents: Agents) -> None:
    """ACP-EXT-001, ACP-JSONRPC-004, ACP-ERROR-001: `_tck/unknown` and `_tck/does_not_exist`
    (no params key) get -32601 with a one-line message."""
    client = agents.spawn()
    client.initialize()
    for method in ("_tck/unknown", "_tck/does_not_exist"):
        error = client.call(method)["error"]
        assert error["code"] == -32601
    finish_clean(client)


def test_notifications_nobody_knows_get_no_answer(agents: Agents) -> None:
    """ACP-EXT-201, ACP-EXT-203: `_tck/ping` and `$/does_not_exist` are ignored silently (the
    whole of stdout holds no answer to them), and the agent keeps serving."""
    client = agents.spawn()
    client.initialize()
    client.notify("_tck/ping", {"hello": "world"})
    client.notify("$/does_not_exist", {})
    assert client.call("_tck/unknown")["error"]["code"] == -32601
    finish_clean(client)


# -- batches ----------------------------------------------------------------------------------


def test_an_empty_batch_is_one_invalid_request_error(agents: Agents) -> None:
    """ACP-BATCH-201: `[]` gets a single object (not an array), id null, code -32600."""
    client = agents.spawn()
    client.initialize()
    client.send_line("[]", invalid=1)
    reply = client.next_message()
    assert isinstance(reply, dict) and reply["id"] is None
    assert reply["error"]["code"] == -32600
    finish_clean(client)


# -- sessions ---------------------------------------------------------------------------------


# -- prompt turns -----------------------------------------------------------------------------


# -- cancel -----------------------------------------------------------------------------------


def cancel(session_id: str, **meta: Any) -> Any:
    params: dict[str, Any] = {"sessionId": session_id}
    if meta:
        params["_meta"] = meta
    return lambda client: client.notify("session/cancel", params)


# -- resume -----------------------------------------------------------------------------------


def history_before(client: KitClient, answer_id: Any) -> list[dict[str, Any]]:
    """The updates read before the answer to `answer_id`, then that answer's result."""
    updates: list[dict[str, Any]] = []
    while True:
        message = client.next_message()
        assert isinstance(message, dict), message
        if "method" not in message and message.get("id") == answer_id:
            assert "result" in message, message
            return updates
        if message.get("method") == "session/update":
            updates.append(message["params"]["update"])
