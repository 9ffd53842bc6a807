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

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, write_fixture
from v2_kit import (
    CANCEL_PROMPT,
    MESSAGE_KINDS,
    STANDARD_INIT,
    STOP_REASONS,
    UPDATE_KINDS,
    KitClient,
    Turn,
)

from acp_server.providers.bundled import DEMO_PROJECT, EXPLANATION

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

    def spawn(self, *flags: str, env: dict[str, str] | None = None) -> KitClient:
        client = KitClient(self.root / "sessions", *flags, env=env)
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


def test_auth_methods_are_typed_and_terminal_ones_only_for_a_terminal_client(
    agents: Agents,
) -> None:
    """ACP-AUTH-201, ACP-AUTH-202, ACP-AUTH-206, ACP-AUTH-207: a live provider without its key
    advertises how to log in: unique ids, every `type` known, a `terminal` method only to a
    client with `capabilities.auth.terminal`, its `args` strings and `env` unique
    `{name, value}` pairs. (With the default provider nothing is advertised: `[]`.)"""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    flags = ("--provider", "openai", "--model", "gpt-test")
    plain = agents.spawn(*flags, env=env)
    methods = plain.initialize()["authMethods"]
    assert [m["type"] for m in methods] == ["agent"]
    finish_clean(plain)
    terminal = agents.spawn(*flags, env=env)
    methods = terminal.initialize(capabilities={"auth": {"terminal": {}}})["authMethods"]
    assert [m["type"] for m in methods] == ["agent", "terminal"]
    assert len({m["methodId"] for m in methods}) == 2
    (entry,) = [m for m in methods if m["type"] == "terminal"]
    assert all(isinstance(arg, str) for arg in entry.get("args", []))
    names = [pair["name"] for pair in entry.get("env", [])]
    assert len(names) == len(set(names))
    assert all(set(pair) == {"name", "value"} for pair in entry.get("env", []))
    finish_clean(terminal)


def test_logging_in_with_the_advertised_method_lets_a_session_start_and_logout_answers(
    agents: Agents,
) -> None:
    """ACP-AUTH-204, ACP-AUTH-203 (run by the kit with `--auth-method agent --allow-logout`):
    with the provider's key in its environment, `auth/login` with the advertised id answers a
    result, `session/new` then succeeds, and `auth/logout {}` answers a result object."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    client = agents.spawn("--provider", "openai", "--model", "gpt-test", env=env)
    (method,) = client.initialize()["authMethods"]
    assert client.result("auth/login", {"methodId": method["methodId"]}) == {}
    assert client.new_session(agents.cwd)
    assert client.result("auth/logout", {}) == {}
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


def test_ids_are_echoed_exactly(agents: Agents) -> None:
    """ACP-JSONRPC-001: an integer id and a string id come back as sent."""
    client = agents.spawn()
    assert client.call("initialize", STANDARD_INIT, id=424242)["id"] == 424242
    answer = client.call("session/new", {"cwd": str(agents.cwd)}, id="tck-string-id")
    assert answer["id"] == "tck-string-id" and answer["result"]["sessionId"]
    finish_clean(client)


def test_session_new_without_cwd_is_an_error_of_one_line(agents: Agents) -> None:
    """ACP-JSONRPC-002, ACP-ERROR-001: `session/new {}` gets a valid error envelope."""
    client = agents.spawn()
    client.initialize()
    error = client.call("session/new", {})["error"]
    assert error["code"] == -32602
    finish_clean(client)


def test_a_line_that_is_not_json_is_a_parse_error_and_the_agent_goes_on(agents: Agents) -> None:
    """ACP-INFO-PARSE-001, ACP-INFO-INVALIDREQ-001, ACP-INFO-BATCH-201: -32700, -32600 and
    (for a truncated batch) -32700, each with id null; then `session/new` still works."""
    client = agents.spawn()
    client.initialize()
    client.send_line("{not valid json at all", invalid=1)
    assert client.response(None)["error"]["code"] == -32700
    client.send_line('{"foo": "bar"}', invalid=1)
    assert client.response(None)["error"]["code"] == -32600
    client.send_line('[{"jsonrpc": "2.0", "id": 1, "method": ', invalid=1)
    assert client.response(None)["error"]["code"] == -32700
    assert client.new_session(agents.cwd)
    finish_clean(client)


def test_the_agent_exits_by_itself_at_the_end_of_its_input(agents: Agents) -> None:
    """ACP-SHUTDOWN-001: after `session/new`, closing stdin ends the process with status 0,
    with no signal (the kit allows 2 s; benchmarks are where time is measured)."""
    client, _ = agents.session()
    finish_clean(client)


def test_text_beyond_ascii_goes_through_in_one_json_message_per_line(agents: Agents) -> None:
    """ACP-TRANSPORT-201, ACP-TRANSPORT-002, ACP-TRANSPORT-203: a turn on "hello é中文 😀";
    every stdout line UTF-8 and one JSON-RPC message; the prompt echoed exactly."""
    client, session_id = agents.session()
    prompt = [{"type": "text", "text": "hello é中文 😀"}]
    turn = client.prompt_turn(session_id, prompt)
    assert_turn_ended(turn, "end_turn")
    echoed = [u for u in turn.updates if u["sessionUpdate"] == "user_message"]
    assert [u["content"] for u in echoed] == [prompt]
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


def test_a_batch_of_notifications_gets_no_answer(agents: Agents) -> None:
    """ACP-BATCH-202, ACP-JSONRPC-003: nothing at all comes back for it."""
    client = agents.spawn()
    client.initialize()
    client.send_line('[{"jsonrpc":"2.0","method":"_tck/notify_only"}]')
    assert client.call("_tck/unknown")["error"]["code"] == -32601
    finish_clean(client)


def test_a_batch_of_values_that_are_not_objects_gets_an_error_for_each(agents: Agents) -> None:
    """ACP-BATCH-203, ACP-JSONRPC-005: `[17, true, null]` gets three -32600 errors with id
    null; then `session/list` with no params is answered."""
    client = agents.spawn()
    client.initialize()
    client.send_line("[17, true, null]", invalid=3)
    reply = client.next_message()
    errors = (
        reply if isinstance(reply, list) else [reply, client.next_message(), client.next_message()]
    )
    assert [(e["id"], e["error"]["code"]) for e in errors] == [(None, -32600)] * 3
    assert client.result("session/list") == {"sessions": []}
    finish_clean(client)


def test_a_batch_of_requests_is_answered_by_one_array(agents: Agents) -> None:
    """ACP-BATCH-204, ACP-BATCH-205, ACP-JSONRPC-001: two `session/list` requests without
    params in one array get one array line of two results, matched by id."""
    client = agents.spawn()
    client.initialize()
    client.methods.update({"tck-batch-a": "session/list", "tck-batch-b": "session/list"})
    client.send_line(
        '[{"jsonrpc":"2.0","id":"tck-batch-a","method":"session/list"},'
        '{"jsonrpc":"2.0","id":"tck-batch-b","method":"session/list"}]'
    )
    reply = client.next_message()
    assert isinstance(reply, list)
    assert sorted((r["id"], r["result"]) for r in reply) == [
        ("tck-batch-a", {"sessions": []}),
        ("tck-batch-b", {"sessions": []}),
    ]
    finish_clean(client)


# -- sessions ---------------------------------------------------------------------------------


def test_new_sessions_each_get_their_own_id(agents: Agents) -> None:
    """ACP-SESSION-001, ACP-SESSION-002, ACP-SESSION-203, ACP-ADDDIRS-201, ACP-AUTH-205:
    `session/new` with only `cwd`, with `mcpServers: []` and with `additionalDirectories`
    each succeed (no -32000: no auth is advertised), with distinct ids."""
    extra = agents.cwd / "extra"
    extra.mkdir()
    client = agents.spawn()
    assert client.initialize()["authMethods"] == []
    ids = [
        client.new_session(agents.cwd),
        client.new_session(agents.cwd),
        client.new_session(agents.cwd, mcpServers=[]),
        client.new_session(agents.cwd, additionalDirectories=[str(extra)]),
    ]
    assert len(set(ids)) == 4
    finish_clean(client)


def test_mcp_servers_that_cannot_start_do_not_stop_a_session(agents: Agents) -> None:
    """ACP-MCP-201, ACP-MCP-202 (the kit records whether they are accepted): a stdio server
    whose command does not exist and an http server nobody listens on."""
    client = agents.spawn()
    client.initialize()
    stdio = {"type": "stdio", "name": "tck-stdio", "command": "/bin/nonexistent-tck-mcp-server"}
    http = {"type": "http", "name": "tck-http", "url": "http://127.0.0.1:1/tck-nonexistent"}
    for server in ({**stdio, "args": []}, http):
        assert client.new_session(agents.cwd, mcpServers=[server])
    finish_clean(client)


def test_a_prompt_for_a_session_nobody_made_is_refused_naming_it(agents: Agents) -> None:
    """ACP-INFO-UNKNOWNSESSION-001: -32002 with `data.sessionId` (the SDK's convention)."""
    client, _ = agents.session()
    prompt = {"sessionId": "tck-does-not-exist", "prompt": HI}
    error = client.call("session/prompt", prompt)["error"]
    assert (error["code"], error["data"]["sessionId"]) == (-32002, "tck-does-not-exist")
    finish_clean(client)


def test_session_list_filters_by_the_cwd_string_given(agents: Agents) -> None:
    """ACP-LIST-201..204: `{}` lists the session made (absolute cwd); a cwd with no session
    lists none; the cwd filter answers entries whose cwd is that very string."""
    client, session_id = agents.session()
    everything = client.result("session/list", {})
    assert [s["sessionId"] for s in everything["sessions"]] == [session_id]
    assert all(os.path.isabs(s["cwd"]) for s in everything["sessions"])
    assert client.result("session/list", {"cwd": str(agents.root / "no-session-here")}) == {
        "sessions": []
    }
    here = client.result("session/list", {"cwd": str(agents.cwd)})["sessions"]
    assert [(s["sessionId"], s["cwd"]) for s in here] == [(session_id, str(agents.cwd))]
    finish_clean(client)


def test_closing_an_idle_session_answers_an_empty_object(agents: Agents) -> None:
    """ACP-CLOSE-201."""
    client, session_id = agents.session()
    assert client.result("session/close", {"sessionId": session_id}) == {}
    finish_clean(client)


def test_a_deleted_session_leaves_the_list(agents: Agents) -> None:
    """ACP-DELETE-201, ACP-DELETE-202, ACP-DELETE-203: delete answers a result, the id leaves
    `session/list`, and deleting an id never created is not an error."""
    client, session_id = agents.session()
    listed = client.result("session/list", {})["sessions"]
    assert session_id in [s["sessionId"] for s in listed]
    assert client.result("session/delete", {"sessionId": session_id}) == {}
    assert client.result("session/list", {}) == {"sessions": []}
    assert "result" in client.call("session/delete", {"sessionId": "tck-never-created"})
    finish_clean(client)


def test_setting_the_first_config_option_answers_every_option_with_it_changed(
    agents: Agents,
) -> None:
    """ACP-CONFIG-201, -202, -204, -206: options with ids and names, each select's current
    value among its values; setting `configOptions[0]` as the kit does answers a superset of
    the ids with that value current, and any `config_option_update` carries them all."""
    client = agents.spawn()
    client.initialize()
    created = client.result("session/new", {"cwd": str(agents.cwd)})
    options = created["configOptions"]
    ids = {option["configId"] for option in options}
    for option in options:
        assert option["configId"] and option["name"]
        if option["type"] == "select":
            values = [o["value"] for o in option["options"]]
            assert option["currentValue"] in values
    first = options[0]
    if first["type"] == "boolean":
        change = {"type": "boolean", "value": not first["currentValue"]}
    else:
        values = [o["value"] for o in first["options"] if o["value"] != first["currentValue"]]
        change = {"type": "id", "value": values[0]}
    answer = client.result(
        "session/set_config_option",
        {"sessionId": created["sessionId"], "configId": first["configId"], **change},
    )
    assert {option["configId"] for option in answer["configOptions"]} >= ids
    changed = [o for o in answer["configOptions"] if o["configId"] == first["configId"]]
    assert changed[0]["currentValue"] == change["value"]
    assert client.finish() == 0
    for message in client.unread:
        update = message.get("params", {}).get("update", {}) if isinstance(message, dict) else {}
        if update.get("sessionUpdate") == "config_option_update":
            assert {o["configId"] for o in update["configOptions"]} >= ids
    assert client.problems() == []


# -- prompt turns -----------------------------------------------------------------------------


def test_a_prompt_is_answered_with_a_receipt_then_runs_from_running_to_idle(
    agents: Agents,
) -> None:
    """ACP-PROMPT-201, -203, -205, ACP-STATE-201..203, ACP-PATCH-201, ACP-ENUM-202,
    ACP-CLIENTCAP-201, -202, ACP-META-201, ACP-SCHEMA-001, ACP-SCHEMA-002 (root keys held to
    SDK 2.4.0's definitions: the kit's pin could not be read): the receipt's `messageId` is the
    echoed user message's; `running`, the answer, then idle `end_turn`; every update for the
    prompted session, of a known kind, messages with ids; no request to the client."""
    client, session_id = agents.session()
    turn = client.prompt_turn(session_id, HI)
    assert_turn_ended(turn, "end_turn")
    receipt = turn.response["result"]["messageId"]
    assert [u for u in turn.updates if u["sessionUpdate"] == "user_message"] == [
        {"sessionUpdate": "user_message", "messageId": receipt, "content": HI}
    ]
    assert set(turn.update_sessions) == {session_id}
    assert turn.calls == []
    answer = [
        u for u in turn.updates if u["sessionUpdate"] in ("agent_message_chunk", "agent_message")
    ]
    text = "".join(
        u["content"]["text"]
        if u["sessionUpdate"] == "agent_message_chunk"
        else u["content"][0]["text"]
        for u in answer
    )
    assert text == EXPLANATION
    assert len({u["messageId"] for u in answer}) == 1 and answer[0]["messageId"] != receipt
    finish_clean(client)


def test_two_turns_get_two_receipt_ids(agents: Agents) -> None:
    """ACP-PATCH-203."""
    client, session_id = agents.session()
    first = client.prompt_turn(session_id, HI)
    second = client.prompt_turn(session_id, HI)
    assert_turn_ended(first, "end_turn")
    assert_turn_ended(second, "end_turn")
    assert first.response["result"]["messageId"] != second.response["result"]["messageId"]
    finish_clean(client)


def test_prompts_with_meta_links_and_every_advertised_content_run_to_idle(
    agents: Agents,
) -> None:
    """ACP-META-001, ACP-PROMPT-003, ACP-PROMPTCAP-001..003: `_meta` on the prompt, a link to
    a file that does not exist, an image, audio and an embedded resource."""
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    wav = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQgAAAAAAAAAAAAAAA=="
    prompts = [
        [{"type": "text", "text": "have a look at this"},
         {"type": "resource_link", "uri": "file:///tmp/tck-example.txt", "name": "example.txt"}],
        [{"type": "text", "text": "describe this image"},
         {"type": "image", "data": png, "mimeType": "image/png"}],
        [{"type": "text", "text": "describe this audio"},
         {"type": "audio", "data": wav, "mimeType": "audio/wav"}],
        [{"type": "text", "text": "use this context"},
         {"type": "resource", "resource": {"uri": f"file://{agents.cwd}/context.txt",
                                           "text": "some embedded context",
                                           "mimeType": "text/plain"}}],
    ]  # fmt: skip
    client, session_id = agents.session()
    meta = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tck": True}
    assert_turn_ended(client.prompt_turn(session_id, HI, meta=meta), "end_turn")
    for prompt in prompts:
        assert_turn_ended(client.prompt_turn(session_id, prompt), "end_turn")
    finish_clean(client)


TOOL_KINDS = {
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
}
TOOL_STATUSES = {"pending", "in_progress", "completed", "failed", "cancelled"}


def demo_session(agents: Agents) -> tuple[KitClient, str]:
    """A session in the demo's project, where the default provider plays the demo recording:
    tool calls, a plan and two permission requests (the kit's own "hi" turns, in a directory
    without it, make none, and the kit skips the rows below)."""
    (agents.cwd / "hello.py").write_bytes(DEMO_PROJECT["hello.py"])
    return agents.session()


def test_a_turn_with_tools_asks_permission_in_v2_shapes_and_reaches_idle(agents: Agents) -> None:
    """ACP-PERM-201, ACP-PATCH-204, -205, -208, -209, ACP-ENUM-201, -202, ACP-CLIENTCAP-202: each
    permission has a title and options; after `requires_action`, `running` again; tool calls
    keep their id, title first, name never changing, known kinds and statuses; the plan has
    its id; no `fs/*` or `terminal/*` call to a v2 client."""
    client, session_id = demo_session(agents)
    turn = client.prompt_turn(session_id, HI)
    assert_turn_ended(turn, "end_turn")
    assert [call["method"] for call in turn.calls] == ["session/request_permission"] * 2
    for call in turn.calls:
        assert call["params"]["title"]
        assert all(o["optionId"] and o["name"] and o["kind"] for o in call["params"]["options"])
    states = [s["state"] for s in turn.states]
    assert states.count("requires_action") == 2
    assert states[len(states) - 1 - states[::-1].index("requires_action") + 1] == "running"
    first_seen: dict[str, dict[str, Any]] = {}
    for update in turn.updates:
        if update["sessionUpdate"] == "tool_call_update":
            call_id = update["toolCallId"]
            first = first_seen.setdefault(call_id, update)
            assert first["title"]
            assert update.get("name", first.get("name")) == first.get("name")
            assert update.get("kind", "other") in TOOL_KINDS
            assert update.get("status", "pending") in TOOL_STATUSES
            for content in update.get("content") or []:
                assert content["type"] in {"content", "diff", "terminal"}
        if update["sessionUpdate"] == "plan_update":
            assert update["plan"]["planId"]
            for entry in update["plan"].get("entries", []):
                assert entry["priority"] in {"high", "medium", "low"}
                assert entry["status"] in {"pending", "in_progress", "completed", "cancelled"}
    assert len(first_seen) == 5
    assert "plan_update" in turn.kinds()
    finish_clean(client)


def test_a_permission_answered_with_an_unknown_outcome_still_ends_the_turn(
    agents: Agents,
) -> None:
    """ACP-ENUM-203: the kit answers `{"outcome": "_tck/unknown"}`; the prompt is not refused
    with -32602 and the turn reaches its idle."""
    client, session_id = demo_session(agents)
    client.permission_outcome = {"outcome": "_tck/unknown"}
    turn = client.prompt_turn(session_id, HI)
    assert "result" in turn.response
    assert turn.idle is not None and turn.idle["stopReason"] in STOP_REASONS
    finish_clean(client)


# -- cancel -----------------------------------------------------------------------------------


def cancel(session_id: str, **meta: Any) -> Any:
    params: dict[str, Any] = {"sessionId": session_id}
    if meta:
        params["_meta"] = meta
    return lambda client: client.notify("session/cancel", params)


@pytest.mark.parametrize("meta", [{}, {"tck": True}], ids=["plain", "with-meta"])
def test_cancel_while_running_ends_the_turn_idle_cancelled_and_nothing_after(
    agents: Agents, meta: dict[str, Any]
) -> None:
    """ACP-CANCEL-201, -202, -203, -205, -206, -207: the kit cancels when `running` shows;
    the prompt's answer is no error, the turn ends idle `cancelled`, no state update follows
    and no response but the prompt's own is sent between the cancel and the idle."""
    client, session_id = agents.hanging()
    turn = client.prompt_turn(
        session_id, [{"type": "text", "text": CANCEL_PROMPT}], on_running=cancel(session_id, **meta)
    )
    assert_turn_ended(turn, "cancelled")
    assert turn.other_responses == []
    assert client.finish() == 0
    late = [m for m in client.unread if isinstance(m, dict) and m.get("method") == "session/update"]
    assert [
        m["params"]["update"]["sessionUpdate"]
        for m in late
        if m["params"]["update"]["sessionUpdate"] == "state_update"
    ] == []
    assert client.problems() == []


def test_closing_a_busy_session_ends_its_turn_idle_cancelled(agents: Agents) -> None:
    """ACP-CANCEL-208, ACP-CLOSE-202: `session/close` sent when `running` shows ends the turn
    with idle `cancelled`, and the close answers `{}`."""
    client, session_id = agents.hanging()
    turn = client.prompt_turn(
        session_id,
        [{"type": "text", "text": CANCEL_PROMPT}],
        on_running=lambda c: c.send("session/close", {"sessionId": session_id}),
    )
    assert_turn_ended(turn, "cancelled")
    closed = turn.other_responses or [client.response(client._next_id)]
    assert [frame["result"] for frame in closed] == [{}]
    finish_clean(client)


def test_a_cancel_with_nothing_running_gets_no_answer(agents: Agents) -> None:
    """ACP-JSONRPC-003, ACP-INFO-CANCEL-201: `session/cancel` is a notification."""
    client, session_id = agents.session()
    client.notify("session/cancel", {"sessionId": session_id})
    assert client.result("session/list", {})["sessions"][0]["sessionId"] == session_id
    finish_clean(client)


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


def test_resuming_a_live_session_without_replay_sends_no_history(agents: Agents) -> None:
    """ACP-RESUME-201, -203, ACP-CONFIG-203, ACP-ADDDIRS-202: the kit resumes the session it
    just made, on the same connection, again and again, with `additionalDirectories` too; no
    message of the history is sent, and the result is a `ResumeSessionResponse`."""
    extra = agents.cwd / "extra"
    extra.mkdir()
    client, session_id = agents.session()
    assert_turn_ended(client.prompt_turn(session_id, HI), "end_turn")
    for extra_params in ({}, {}, {"additionalDirectories": [str(extra)]}):
        params = {"sessionId": session_id, "cwd": str(agents.cwd), **extra_params}
        updates = history_before(client, client.send("session/resume", params))
        assert [u for u in updates if u["sessionUpdate"] in MESSAGE_KINDS] == []
    finish_clean(client)


def test_resuming_from_the_start_replays_the_history_before_the_answer(agents: Agents) -> None:
    """ACP-RESUME-202, -204, -205: after a "remember this" turn, `replayFrom: {"type":
    "start"}` replays the messages before its answer, the user's with its receipt's id, any
    chunk after its whole message with `content: []`; nothing for the session follows."""
    client, session_id = agents.session()
    turn = client.prompt_turn(session_id, [{"type": "text", "text": "remember this"}])
    receipt = turn.response["result"]["messageId"]
    params = {"sessionId": session_id, "cwd": str(agents.cwd), "replayFrom": {"type": "start"}}
    updates = history_before(client, client.send("session/resume", params))
    users = [u for u in updates if u["sessionUpdate"] == "user_message"]
    assert users == [
        {"sessionUpdate": "user_message", "messageId": receipt,
         "content": [{"type": "text", "text": "remember this"}]}
    ]  # fmt: skip
    wholes: set[tuple[str, str]] = set()
    for update in updates:
        kind = update["sessionUpdate"]
        if kind in MESSAGE_KINDS and not kind.endswith("_chunk"):
            wholes.add((kind, update["messageId"]))
        elif kind in MESSAGE_KINDS:
            assert (kind.removesuffix("_chunk"), update["messageId"]) in wholes, update
    assert client.finish() == 0
    assert [
        m
        for m in client.unread
        if isinstance(m, dict)
        and m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] != "notice"
    ] == []
    assert client.problems() == []
