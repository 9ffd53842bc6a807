"""Hostile input over the real stdio pipe (SPEC 0, 4): every frame gets the answer JSON-RPC
prescribes, with the exact error, or none at all, and the connection serves on.

Each test writes raw lines to a real `acp-server serve` process. After every hostile line a
probe (`authenticate`, answered inline, so it cannot be overtaken) shows that nothing else was
answered and that the connection still serves. Every server is ended at the end of its input and
must exit 0 with only JSON-RPC frames on stdout and no traceback on stderr.

The tables cover what a careless or malicious client can send: truncated and invalid JSON,
invalid UTF-8, values that are not objects, batches, wrong protocol versions, ids of every type,
huge and deeply nested params, params of the wrong type for every method, unknown sessions,
session ids that try to leave the sessions root, relative and missing working directories, and
responses to requests the server never sent (or already had answered). The hypothesis tests then
generate frames (structured requests and notifications, arbitrary JSON values, arbitrary bytes,
mutations of valid frames) against one server process per test, each checked against an oracle
of what JSON-RPC 2.0 says the answer must be.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from acp_process import AcpProcess, assert_jsonrpc_frame
from fixtures_builder import Scenario, Step, ToolUse, args, write_fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polling import TIMEOUT

pytestmark = pytest.mark.process

SESSION_ID_RULE = "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
AUTHENTICATE = {"methodId": "agent"}

REQUEST_METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/close",
    "session/delete",
    "session/prompt",
    "session.page",
    "session.follow",
    "session.unfollow",
]
NOTIFICATION_METHODS = ["session/cancel", "$/cancel_request"]


# ---------------------------------------------------------------------------------------------
# The wire: one process, hostile lines in, exact answers out.


class Wire:
    """A server process and the checks each hostile line goes through."""

    def __init__(self, process: AcpProcess, sessions_dir: Path) -> None:
        self.process = process
        self.sessions_dir = sessions_dir
        self._probes = itertools.count()
        self._probe_prefix = f"probe-{uuid.uuid4().hex}-"

    def send_probe(self) -> str:
        probe_id = f"{self._probe_prefix}{next(self._probes)}"
        self.process.send(
            {"jsonrpc": "2.0", "id": probe_id, "method": "authenticate", "params": AUTHENTICATE}
        )
        return probe_id

    def serving(self) -> None:
        """The next frame is the answer to a fresh probe: nothing else was pending."""
        probe_id = self.send_probe()
        assert self.process.read_frame(TIMEOUT) == {"jsonrpc": "2.0", "id": probe_id, "result": {}}

    def reply(self, line: bytes) -> dict[str, Any]:
        """Send one line; its one answer (then the connection serves on)."""
        self.process.send(line)
        frame = self.process.read_frame(TIMEOUT)
        self.serving()
        return frame

    def no_reply(self, line: bytes) -> None:
        """Send one line: no answer comes, and the connection serves on."""
        self.process.send(line)
        self.serving()

    def close(self) -> None:
        """End the input: exit 0, only JSON-RPC frames on stdout, no traceback on stderr."""
        assert self.process.finish(TIMEOUT) == 0, self.process.stderr
        assert self.process.stdout_tail == b""
        for line in self.process.stdout_lines:
            assert_jsonrpc_frame(line)
        assert "Traceback" not in self.process.stderr, self.process.stderr


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wire]:
    """One server for every table test (each leaves nothing behind but sessions of its own)."""
    sessions_dir = tmp_path_factory.mktemp("hostile") / "sessions"
    with AcpProcess(sessions_dir) as process:
        wire = Wire(process, sessions_dir)
        assert (
            wire.reply(
                b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
            )["result"]["protocolVersion"]
            == 1
        )
        yield wire
        wire.close()


def request(method: str, params: Any = None, request_id: Any = 1) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message, ensure_ascii=False).encode()


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def parse_error(message: str) -> dict[str, Any]:
    return error(None, -32700, f"Parse error: {message}")


def invalid_request(request_id: Any, problem: str) -> dict[str, Any]:
    return error(request_id, -32600, f"Invalid request: {problem}")


def invalid_params(request_id: Any, problem: str, path: str | None = None) -> dict[str, Any]:
    if path is None:
        return error(request_id, -32602, f"Invalid params: {problem}")
    return error(request_id, -32602, f"Invalid params: {problem} - at `{path}`", {"path": path})


# ---------------------------------------------------------------------------------------------
# Malformed JSON and invalid UTF-8: -32700 with a null id.

TRUNCATED = "Input data was truncated"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}', TRUNCATED),
        (b'{"jsonrpc":"2.0","id":1,"method":"sess', TRUNCATED),
        (b"{", TRUNCATED),
        (b"tru", TRUNCATED),
        (b'{"jsonrpc":"2.0" "id":1}', "JSON is malformed: expected ',' or '}' (byte 17)"),
        (b"{'jsonrpc':'2.0'}", "JSON is malformed: object keys must be strings (byte 1)"),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"session/list",}',
            "JSON is malformed: trailing comma in object (byte 48)",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"session/list"} x',
            "JSON is malformed: trailing characters (byte 50)",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"session/list"}{"jsonrpc":"2.0","id":2,"method":"session/list"}',
            "JSON is malformed: trailing characters (byte 49)",
        ),
        (b"NaN", "JSON is malformed: invalid character (byte 0)"),
        (b"\xff\xfe", "JSON is malformed: invalid character (byte 0)"),
        (
            b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"session/list"}',
            "JSON is malformed: invalid character (byte 0)",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"a\x01b"}',
            "JSON is malformed: invalid character (byte 35)",
        ),
        (
            b'{"jsonrpc":"2.0","id":"\\ud800","method":"session/list"}',
            "JSON is malformed: unexpected end of escaped utf-16 surrogate pair (byte 29)",
        ),
    ],
    ids=lambda value: value.decode("latin-1")[:40] if isinstance(value, bytes) else None,
)
def test_malformed_json_is_a_parse_error_with_a_null_id(
    wire: Wire, line: bytes, problem: str
) -> None:
    assert wire.reply(line) == parse_error(problem)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"session/\xff"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}',  # an overlong "/"
        b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"session/list"}',  # an encoded surrogate
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cwd":"/caf\xe9"}}',  # Latin-1
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cwd":"/\xe2\x82"}}',  # cut short
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"\xff":1}}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","\xfe\xff":"an unknown key"}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","extra":"an unknown member \xff"}',
        b'{"jsonrpc":"2.0","id":424242,"result":"\xff"}',
    ],
    ids=lambda value: value.decode("latin-1")[-30:],
)
def test_invalid_utf8_anywhere_in_a_line_is_a_parse_error(wire: Wire, line: bytes) -> None:
    assert wire.reply(line) == parse_error("Invalid UTF-8 encoded string")


# ---------------------------------------------------------------------------------------------
# Valid JSON that is not a request object: -32600.

NOT_AN_OBJECT = "a request must be a JSON object"
BATCH = "batch requests are not supported"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"42", NOT_AN_OBJECT),
        (b"-0", NOT_AN_OBJECT),
        (b"1.5e3", NOT_AN_OBJECT),
        (b'"session/list"', NOT_AN_OBJECT),
        (b"true", NOT_AN_OBJECT),
        (b"false", NOT_AN_OBJECT),
        (b"null", NOT_AN_OBJECT),
        (b"[]", "an empty array is not a request"),
        (b"[1,2,3]", BATCH),
        (b"[[]]", BATCH),
        (b'[{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"abc"}}]', BATCH),
        (
            b'[{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"agent"}},{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"agent"}}]',
            BATCH,
        ),
    ],
)
def test_json_that_is_not_a_request_object_is_an_invalid_request(
    wire: Wire, line: bytes, problem: str
) -> None:
    assert wire.reply(line) == invalid_request(None, problem)


def test_a_batch_is_refused_whole_and_none_of_its_requests_runs(wire: Wire, tmp_path: Path) -> None:
    marker = str(tmp_path / "batched")
    batch = [
        json.loads(request("session/new", {"cwd": marker, "mcpServers": []}, request_id=n))
        for n in (1, 2)
    ]
    assert wire.reply(json.dumps(batch).encode()) == invalid_request(None, BATCH)
    sessions = wire.reply(request("session/list", {"cwd": marker}))
    assert sessions == {"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}


# ---------------------------------------------------------------------------------------------
# Protocol versions and ids.

VERSION = '"jsonrpc" must be "2.0"'


@pytest.mark.parametrize(
    "version",
    ['"1.0"', '"2"', '"2.00"', '"2.0 "', '" 2.0"', "2.0", "2", "null", "[]", '{"v":"2.0"}', None],
    ids=lambda v: "absent" if v is None else v,
)
def test_a_wrong_jsonrpc_version_is_an_invalid_request_answered_with_the_id(
    wire: Wire, version: str | None
) -> None:
    member = "" if version is None else f'"jsonrpc":{version},'
    line = (
        "{" + member + '"id":"v","method":"authenticate","params":{"methodId":"agent"}}'
    ).encode()
    assert wire.reply(line) == invalid_request("v", VERSION)


def test_the_last_of_duplicate_jsonrpc_members_counts(wire: Wire) -> None:
    line = b'{"jsonrpc":"2.0","jsonrpc":"1.0","id":"dup","method":"authenticate","params":{"methodId":"agent"}}'
    assert wire.reply(line) == invalid_request("dup", VERSION)


@pytest.mark.parametrize(
    "request_id",
    [
        0,
        -1,
        7,
        2**53 - 1,
        2**53,
        -(2**63),
        2**64,
        10**30,
        "",
        "a",
        "ü中😀",
        'quote " and \\ back',
        "line\nbreak",
        "x" * 10_000,
        None,
    ],
    ids=lambda v: repr(v)[:24],
)
def test_every_valid_id_is_echoed_exactly(wire: Wire, request_id: Any) -> None:
    assert wire.reply(request("authenticate", AUTHENTICATE, request_id)) == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {},
    }


@pytest.mark.parametrize(
    "raw_id", ["1.5", "1.0", "1e3", "-0.0", "true", "false", "[]", "[1]", "{}", '{"id":1}']
)
def test_an_id_that_is_not_a_string_an_integer_or_null_is_refused_with_a_null_id(
    wire: Wire, raw_id: str
) -> None:
    line = (
        '{"jsonrpc":"2.0","id":'
        + raw_id
        + ',"method":"authenticate","params":{"methodId":"agent"}}'
    ).encode()
    assert wire.reply(line) == invalid_request(None, '"id" must be a string, an integer or null')


def test_an_id_out_of_every_number_range_is_a_parse_error(wire: Wire) -> None:
    line = b'{"jsonrpc":"2.0","id":1e400,"method":"authenticate","params":{"methodId":"agent"}}'
    frame = wire.reply(line)
    assert (frame["id"], frame["error"]["code"]) == (None, -32700)


@pytest.mark.parametrize(
    ("line", "answer_id", "problem"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":5}', 1, '"method" must be a string'),
        (b'{"jsonrpc":"2.0","id":1,"method":null}', 1, '"method" must be a string'),
        (b'{"jsonrpc":"2.0","id":1,"method":["session/list"]}', 1, '"method" must be a string'),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":"x"}',
            1,
            '"params" must be an object or an array',
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":true}',
            1,
            '"params" must be an object or an array',
        ),
        (
            b'{"jsonrpc":"2.0","method":"session/cancel","params":5}',
            None,
            '"params" must be an object or an array',
        ),
        (b'{"jsonrpc":"2.0","method":7}', None, '"method" must be a string'),
    ],
)
def test_a_malformed_request_object_is_an_invalid_request(
    wire: Wire, line: bytes, answer_id: Any, problem: str
) -> None:
    assert wire.reply(line) == invalid_request(answer_id, problem)


# ---------------------------------------------------------------------------------------------
# Huge and deeply nested params.


def test_a_huge_params_object_is_read_whole(wire: Wire) -> None:
    params = {
        "methodId": "agent",
        "_meta": {"blob": "a" * (8 << 20), "many": {str(n): n for n in range(100_000)}},
    }
    assert wire.reply(request("authenticate", params, "huge")) == {
        "jsonrpc": "2.0",
        "id": "huge",
        "result": {},
    }


def test_a_huge_method_name_is_method_not_found_naming_it(wire: Wire) -> None:
    method = "m" * (1 << 20)
    assert wire.reply(request(method, {}, "long")) == error(
        "long", -32601, "Method not found", method
    )


def test_moderately_nested_params_are_fine(wire: Wire) -> None:
    nested: Any = "leaf"
    for _ in range(200):
        nested = {"a": [nested]}
    assert wire.reply(request("authenticate", {"methodId": "agent", "_meta": nested}, "deep")) == {
        "jsonrpc": "2.0",
        "id": "deep",
        "result": {},
    }


@pytest.mark.parametrize("depth", [5_000, 1_000_000])
@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_params_nested_past_the_limit_are_a_parse_error(
    wire: Wire, depth: int, opener: bytes
) -> None:
    closer = b"]" if opener == b"[" else b"}"
    line = (
        b'{"jsonrpc":"2.0","id":1,"method":"authenticate","params":{"methodId":"agent","_meta":'
        + opener * depth
        + b"1"
        + closer * depth
        + b"}}"
    )
    assert wire.reply(line) == parse_error("JSON nested too deeply")


# ---------------------------------------------------------------------------------------------
# Params of the wrong type, for every method.

OBJECT_EXPECTED = "Expected `object`, got `array`"


@pytest.mark.parametrize("method", REQUEST_METHODS)
@pytest.mark.parametrize(
    "params", [[], [1, "x"], [{"sessionId": "abc"}]], ids=["empty", "values", "object-inside"]
)
def test_params_as_an_array_are_invalid_params_for_every_method(
    wire: Wire, method: str, params: list[Any]
) -> None:
    assert wire.reply(request(method, params)) == invalid_params(1, OBJECT_EXPECTED)


@pytest.mark.parametrize(
    ("method", "params", "problem", "path"),
    [
        ("initialize", {"protocolVersion": "1"}, "Expected `int`, got `str`", "$.protocolVersion"),
        ("initialize", {"protocolVersion": 70000}, "Expected `int` <= 65535", "$.protocolVersion"),
        ("initialize", {}, "Object missing required field `protocolVersion`", None),
        ("authenticate", {"methodId": 5}, "Expected `str`, got `int`", "$.methodId"),
        ("authenticate", None, "Object missing required field `methodId`", None),
        ("session/new", {"cwd": 5}, "Expected `str`, got `int`", "$.cwd"),
        (
            "session/new",
            {"cwd": "/w", "mcpServers": {}},
            "Expected `array`, got `object`",
            "$.mcpServers",
        ),
        (
            "session/new",
            {"cwd": "/w", "additionalDirectories": "x"},
            "Expected `array`, got `str`",
            "$.additionalDirectories",
        ),
        ("session/load", {"sessionId": 5, "cwd": "/w"}, "Expected `str`, got `int`", "$.sessionId"),
        (
            "session/load",
            {
                "sessionId": "abc",
                "cwd": "/w",
                "_meta": {"acp-server": {"replay": {"maxMessages": "9"}}},
            },
            "Expected `int`, got `str`",
            '$._meta["acp-server"].replay.maxMessages',
        ),
        ("session/resume", {"sessionId": "abc", "cwd": []}, "Expected `str`, got `array`", "$.cwd"),
        ("session/list", {"cursor": 5}, "Expected `str | null`, got `int`", "$.cursor"),
        ("session/list", {"cwd": 5}, "Expected `str | null`, got `int`", "$.cwd"),
        (
            "session/list",
            {"cursor": "not-a-cursor"},
            "not a cursor returned by session/list",
            "$.cursor",
        ),
        ("session/close", {"sessionId": None}, "Expected `str`, got `null`", "$.sessionId"),
        ("session/delete", {"sessionId": {}}, "Expected `str`, got `object`", "$.sessionId"),
        (
            "session/prompt",
            {"sessionId": "abc", "prompt": "hi"},
            "Expected `array`, got `str`",
            "$.prompt",
        ),
        (
            "session/prompt",
            {"sessionId": "abc", "prompt": [{"type": "nope"}]},
            "Invalid value 'nope'",
            "$.prompt[0].type",
        ),
        (
            "session/prompt",
            {"sessionId": "abc", "prompt": [{"type": "text"}]},
            "Object missing required field `text`",
            "$.prompt[0]",
        ),
        ("session/prompt", {"sessionId": "abc"}, "Object missing required field `prompt`", None),
        (
            "session.page",
            {"address": "x", "throughSeq": 0},
            "Expected `object`, got `str`",
            "$.address",
        ),
        (
            "session.page",
            {"address": {"kind": "session", "sessionId": "abc"}, "throughSeq": "0"},
            "Expected `int`, got `str`",
            "$.throughSeq",
        ),
        (
            "session.follow",
            {"address": {"kind": "session", "sessionId": 5}},
            "Expected `str`, got `int`",
            "$.address.sessionId",
        ),
        (
            "session.follow",
            {"address": {"kind": "bogus"}},
            "Invalid value 'bogus'",
            "$.address.kind",
        ),
        (
            "session.unfollow",
            {"subscriptionId": 5},
            "Expected `str`, got `int`",
            "$.subscriptionId",
        ),
        (
            "session.unfollow",
            {"subscriptionId": "never-made"},
            "no subscription 'never-made'",
            "$.subscriptionId",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_wrong_field_is_invalid_params_naming_it(
    wire: Wire, method: str, params: Any, problem: str, path: str | None
) -> None:
    assert wire.reply(request(method, params)) == invalid_params(1, problem, path)


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        [1],
        {"sessionId": 5},
        {"sessionId": "../x"},
        {"sessionId": "unknown"},
        {"sessionId": "abc", "_meta": []},
    ],
    ids=repr,
)
@pytest.mark.parametrize("method", NOTIFICATION_METHODS)
def test_notifications_with_wrong_params_get_no_answer(
    wire: Wire, method: str, params: Any
) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    wire.no_reply(json.dumps(message).encode())


@pytest.mark.parametrize(
    "method", ["no/such/method", "_vendor/notification", "session/new", "initialize"]
)
def test_notifications_of_unknown_or_request_methods_are_ignored(wire: Wire, method: str) -> None:
    wire.no_reply(
        json.dumps(
            {"jsonrpc": "2.0", "method": method, "params": {"cwd": "/w", "protocolVersion": 1}}
        ).encode()
    )


# ---------------------------------------------------------------------------------------------
# Sessions: unknown ones, ids that try to leave the sessions root, working directories.

UNKNOWN = "0123456789abcdef0123456789abcdef"


def session_params(method: str, session_id: str, cwd: str = "/w") -> dict[str, Any]:
    if method in ("session.page", "session.follow"):
        return {"address": {"kind": "session", "sessionId": session_id}, "throughSeq": 0}
    return {"sessionId": session_id, "cwd": cwd, "prompt": [{"type": "text", "text": "hi"}]}


SESSION_METHODS = [
    "session/load",
    "session/resume",
    "session/prompt",
    "session/close",
    "session/delete",
    "session.page",
    "session.follow",
]


@pytest.mark.parametrize("method", [m for m in SESSION_METHODS if m != "session/delete"])
def test_an_unknown_session_is_32002_naming_it(wire: Wire, method: str) -> None:
    assert wire.reply(request(method, session_params(method, UNKNOWN))) == error(
        1, -32002, f"Unknown session: {UNKNOWN}", {"sessionId": UNKNOWN}
    )


@pytest.mark.parametrize(
    "session_id",
    [
        "../x",
        "..",
        ".",
        "/etc/passwd",
        "a/b",
        "a/../../b",
        "a\\b",
        "%2e%2e",
        "..%2f",
        "x\x00",
        "x\n",
        " x",
        "-x",
        "ü",
        "x" * 129,
    ],
    ids=repr,
)
@pytest.mark.parametrize("method", SESSION_METHODS)
def test_a_session_id_that_could_name_another_path_is_refused(
    wire: Wire, method: str, session_id: str
) -> None:
    path = "$.address.sessionId" if method.startswith("session.") else "$.sessionId"
    shown = repr(session_id) if len(session_id) <= 64 else repr(session_id)[:37] + "..."
    assert wire.reply(request(method, session_params(method, session_id))) == invalid_params(
        1, f"invalid session id {shown}: {SESSION_ID_RULE}", path
    )


def test_a_traversing_session_id_never_reaches_the_file_system(wire: Wire) -> None:
    # A log planted beside the sessions root, where "../planted" would lead.
    planted = wire.sessions_dir.parent / "planted"
    planted.mkdir()
    (planted / "session.jsonl").write_text(
        '{"type":"session","version":2,"id":"planted","createdAt":0,"cwd":"/w"}\n'
    )
    for method in ("session/load", "session/delete"):
        frame = wire.reply(request(method, session_params(method, "../planted")))
        assert frame["error"]["code"] == -32602
    assert (planted / "session.jsonl").exists()


@pytest.mark.parametrize(
    "cwd", ["relative", "./here", "../up", "", "~/home", "C:\\windows"], ids=repr
)
@pytest.mark.parametrize(
    "method", ["session/new", "session/load", "session/resume", "session/list"]
)
def test_a_relative_cwd_is_invalid_params(wire: Wire, method: str, cwd: str) -> None:
    params = (
        {"cwd": cwd}
        if method in ("session/new", "session/list")
        else {"sessionId": "abc", "cwd": cwd}
    )
    assert wire.reply(request(method, params)) == invalid_params(
        1, f"must be an absolute path, got {cwd!r}", "$.cwd"
    )


def test_a_megabyte_relative_cwd_is_echoed_cut_to_200_characters(wire: Wire) -> None:
    cwd = "x" * 1_000_000
    reply = wire.reply(request("session/new", {"cwd": cwd, "mcpServers": []}))
    assert reply == invalid_params(1, f"must be an absolute path, got '{'x' * 199}...", "$.cwd")


@pytest.mark.parametrize("method", ["session/new", "session/load", "session/resume"])
def test_a_cwd_with_a_nul_character_is_invalid_params(wire: Wire, method: str) -> None:
    params = {"sessionId": "abc", "cwd": "/w\x00/x"}
    assert wire.reply(request(method, params)) == invalid_params(
        1, "a path cannot contain NUL characters", "$.cwd"
    )


@pytest.mark.parametrize("method", ["session/new", "session/load", "session/resume"])
def test_a_relative_additional_directory_is_invalid_params_naming_its_index(
    wire: Wire, method: str
) -> None:
    params = {"sessionId": "abc", "cwd": "/w", "additionalDirectories": ["/ok", "rel"]}
    assert wire.reply(request(method, params)) == invalid_params(
        1, "must be an absolute path, got 'rel'", "$.additionalDirectories[1]"
    )


# A fixture whose one turn reads a file, runs a command, and answers.
MISSING_CWD_SCENARIO = Scenario(
    [
        (
            "look around",
            [
                Step(calls=[ToolUse("call_read", "read_file", args(path="notes.txt"))]),
                Step(calls=[ToolUse("call_run", "run_command", args(command="ls"))]),
                Step(text="Nothing here."),
            ],
        )
    ]
)


def test_a_missing_cwd_is_accepted_and_local_tools_say_it_is_missing(tmp_path: Path) -> None:
    """The client may own the file system (fs/*, terminal/*), so a cwd that does not exist
    here is not refused; the server's own tools then fail with a clear result, never a crash."""
    fixture = write_fixture(tmp_path / "fixture", MISSING_CWD_SCENARIO)
    missing = str(tmp_path / "no" / "such" / "dir")
    with AcpProcess(tmp_path / "sessions", "--replay", str(fixture)) as process:
        wire = Wire(process, tmp_path / "sessions")
        process.initialize()
        session_id = process.result("session/new", {"cwd": missing, "mcpServers": []})["sessionId"]
        answered, frames = process.exchange(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "look around"}]},
            answer=lambda frame: {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
        )
        assert answered["result"] == {"stopReason": "end_turn"}
        results = {
            f["params"]["update"]["toolCallId"]: (
                f["params"]["update"]["status"],
                f["params"]["update"]["content"][0]["content"]["text"],
            )
            for f in frames
            if f.get("method") == "session/update"
            and f["params"]["update"].get("status") in ("completed", "failed")
        }
        assert results == {
            "call_read": ("failed", "cannot read notes.txt: No such file or directory"),
            "call_run": (
                "failed",
                f"cannot run ls: the working directory {missing} does not exist",
            ),
        }
        wire.close()


# ---------------------------------------------------------------------------------------------
# Responses the server never asked for, and answers given twice.


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":424242,"result":{}}',
        b'{"jsonrpc":"2.0","id":"never-sent","result":null}',
        b'{"jsonrpc":"2.0","id":null,"result":{}}',
        b'{"jsonrpc":"2.0","id":-1,"error":{"code":-32603,"message":"boom"}}',
        b'{"jsonrpc":"2.0","id":424243,"error":"not an error object"}',
        b'{"jsonrpc":"2.0","id":424244,"result":1,"error":{"code":1,"message":"both"}}',
        b'{"jsonrpc":"2.0","result":{}}',
        b'{"id":424245,"result":{}}',
    ],
)
def test_a_response_to_a_request_never_sent_is_dropped_silently(wire: Wire, line: bytes) -> None:
    wire.no_reply(line)


WRITE_SCENARIO = Scenario(
    [
        (
            "write it",
            [
                Step(
                    calls=[
                        ToolUse("call_write", "write_file", args(path="out.txt", content="first"))
                    ]
                ),
                Step(text="Written."),
            ],
        )
    ]
)
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
REJECT = {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


@dataclass
class Asked:
    process: AcpProcess
    workspace: Path
    session_id: str
    prompt_id: int
    permission: dict[str, Any]


@pytest.fixture
def asked(tmp_path: Path) -> Iterator[Asked]:
    """A server whose prompt waits on a permission request for a `write_file` call."""
    fixture = write_fixture(tmp_path / "fixture", WRITE_SCENARIO)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with AcpProcess(tmp_path / "sessions", "--replay", str(fixture)) as process:
        process.initialize()
        session_id = process.result("session/new", {"cwd": str(workspace), "mcpServers": []})[
            "sessionId"
        ]
        prompt_id = process.send_request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "write it"}]},
        )
        while (frame := process.read_frame()).get("method") != "session/request_permission":
            assert frame.get("method") == "session/update", frame
        yield Asked(process, workspace, session_id, prompt_id, frame)
        Wire(process, tmp_path / "sessions").close()


def finish_turn(asked: Asked) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Frames until the prompt's answer: (the answer, the updates before it)."""
    frames = []
    while (frame := asked.process.read_frame()).get("id") != asked.prompt_id:
        assert frame.get("method") == "session/update", frame
        frames.append(frame["params"]["update"])
    return frame, frames


def test_a_second_answer_to_a_permission_request_is_dropped(asked: Asked) -> None:
    permission_id = asked.permission["id"]
    asked.process.send({"jsonrpc": "2.0", "id": permission_id, "result": ALLOW})
    asked.process.send({"jsonrpc": "2.0", "id": permission_id, "result": REJECT})
    asked.process.send(
        {"jsonrpc": "2.0", "id": permission_id, "error": {"code": -32603, "message": "late"}}
    )
    answer, updates = finish_turn(asked)
    assert answer["result"] == {"stopReason": "end_turn"}
    assert [u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update"] == [
        "in_progress",
        "completed",
    ]
    assert (asked.workspace / "out.txt").read_text() == "first"
    Wire(asked.process, asked.workspace.parent / "sessions").serving()


def test_an_answer_with_the_right_number_as_a_string_id_does_not_answer(asked: Asked) -> None:
    permission_id = asked.permission["id"]
    assert type(permission_id) is int
    asked.process.send({"jsonrpc": "2.0", "id": str(permission_id), "result": REJECT})
    Wire(
        asked.process, asked.workspace.parent / "sessions"
    ).serving()  # still waiting: nothing was answered
    asked.process.send({"jsonrpc": "2.0", "id": permission_id, "result": ALLOW})
    answer, _ = finish_turn(asked)
    assert answer["result"] == {"stopReason": "end_turn"}
    assert (asked.workspace / "out.txt").read_text() == "first"


def test_a_malformed_answer_to_a_permission_request_fails_the_tool_not_the_turn(
    asked: Asked,
) -> None:
    asked.process.send({"jsonrpc": "2.0", "id": asked.permission["id"], "result": {"outcome": 5}})
    answer, updates = finish_turn(asked)
    assert answer["result"] == {"stopReason": "end_turn"}
    assert [u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update"] == ["failed"]
    assert not (asked.workspace / "out.txt").exists()


# ---------------------------------------------------------------------------------------------
# Generated frames: an oracle for the answer JSON-RPC 2.0 prescribes.


@dataclass(frozen=True)
class Silence:
    """No answer (a notification, a response, a blank line)."""


@dataclass(frozen=True)
class Refusal:
    """One error answer, produced while reading the line: -32700 or -32600."""

    code: int
    id: Any


@dataclass(frozen=True)
class Answer:
    """One answer with this id: a result, or an error from the method (never -32603)."""

    id: Any


Expected = Silence | Refusal | Answer
METHOD_ERRORS = {-32601, -32602, -32002, -32010, -32011, -32800}


def valid_id(value: Any) -> bool:
    return type(value) in (int, str) or value is None


def expected_for_value(value: Any) -> Expected:
    if not isinstance(value, dict):
        return Refusal(-32600, None)
    if "method" not in value and ("result" in value or "error" in value):
        return Silence()
    has_id = "id" in value
    usable = value["id"] if has_id and valid_id(value["id"]) else None
    if (
        value.get("jsonrpc") != "2.0"
        or type(value.get("method")) is not str
        or (has_id and not valid_id(value["id"]))
        or ("params" in value and not isinstance(value["params"], (dict, list, type(None))))
    ):
        return Refusal(-32600, usable)
    return Answer(value["id"]) if has_id else Silence()


def expected_for_line(line: bytes) -> Expected:
    if not line.strip():
        return Silence()
    try:
        line.decode("utf-8")
        value = msgspec.json.decode(line)
    except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
        return Refusal(-32700, None)
    return expected_for_value(value)


def check_line(wire: Wire, line: bytes) -> None:
    """Send `line`, then a probe; exactly the answer the oracle names arrives (in any order
    with the probe's, as a method may answer from a task of its own), and nothing else."""
    assert b"\n" not in line
    expected = expected_for_line(line)
    wire.process.send_raw(line + b"\n")
    probe_id = wire.send_probe()
    frames: list[dict[str, Any]] = []
    probed = False
    answered = not isinstance(expected, Answer)
    while not (probed and answered):
        frame = assert_jsonrpc_frame(wire.process.read_line(TIMEOUT))
        if frame.get("id") == probe_id and "method" not in frame:
            assert frame["result"] == {}
            probed = True
            continue
        frames.append(frame)
        if (
            isinstance(expected, Answer)
            and frame.get("id") == expected.id
            and "method" not in frame
        ):
            answered = True
    if isinstance(expected, Silence):
        assert frames == [], (line, frames)
    elif isinstance(expected, Refusal):
        assert (
            len(frames) == 1
            and frames[0]["id"] == expected.id
            and frames[0]["error"]["code"] == expected.code
        ), (line, frames)
    else:
        assert len(frames) == 1, (line, frames)
        if "error" in frames[0]:
            assert frames[0]["error"]["code"] in METHOD_ERRORS, (line, frames)


@pytest.fixture
def fresh_wire(tmp_path: Path) -> Iterator[Wire]:
    """One long-lived server for the examples of one generated test."""
    with AcpProcess(tmp_path / "sessions") as process:
        wire = Wire(process, tmp_path / "sessions")
        yield wire
        wire.close()


GENERATED = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.integers(-(2**64), 2**64) | st.text(max_size=12) | st.none() | json_values
methods = st.sampled_from(
    REQUEST_METHODS + NOTIFICATION_METHODS + ["", "_vendor/x", "session/unknown", "rpc.discover"]
) | st.text(max_size=16)
FIELDS = [
    "protocolVersion",
    "methodId",
    "cwd",
    "mcpServers",
    "sessionId",
    "prompt",
    "cursor",
    "address",
    "throughSeq",
    "beforeSeq",
    "maxMessages",
    "subscriptionId",
    "requestId",
    "_meta",
    "additionalDirectories",
]
field_values = (
    json_values
    | st.sampled_from(["/", "/tmp", "relative", UNKNOWN, "../x", "", "session"])
    | st.just({"kind": "session", "sessionId": UNKNOWN})
)
params = (
    st.dictionaries(st.sampled_from(FIELDS), field_values, max_size=4)
    | st.lists(json_values, max_size=3)
    | st.none()
)
rpc_objects = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", "2", 2.0, None]) | json_values,
        "id": ids,
        "method": methods | json_values,
        "params": params | json_values,
        "result": json_values,
        "error": json_values,
    },
)


def encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def test_generated_requests_get_exactly_one_answer_with_their_id(fresh_wire: Wire) -> None:
    unique = itertools.count(1)

    @GENERATED
    @given(method=methods, params=params, string_id=st.booleans())
    def one(method: str, params: Any, string_id: bool) -> None:
        n = next(unique)
        message: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": f"req-{n}" if string_id else n,
            "method": method,
        }
        if params is not None:
            message["params"] = params
        check_line(fresh_wire, encode(message))

    one()
    answers: dict[Any, int] = {}
    for line in fresh_wire.process.stdout_lines:
        frame = json.loads(line)
        if "method" not in frame:
            answers[frame["id"]] = answers.get(frame["id"], 0) + 1
    assert all(count == 1 for count in answers.values()), {
        k: v for k, v in answers.items() if v != 1
    }


def test_generated_notifications_get_no_answer(fresh_wire: Wire) -> None:
    @GENERATED
    @given(method=methods, params=params)
    def one(method: str, params: Any) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        check_line(fresh_wire, encode(message))

    one()


def test_arbitrary_json_values_get_the_answer_json_rpc_prescribes(fresh_wire: Wire) -> None:
    @GENERATED
    @given(st.one_of(rpc_objects, json_values))
    def one(value: Any) -> None:
        check_line(fresh_wire, encode(value))

    one()


def test_arbitrary_bytes_get_at_most_their_one_error(fresh_wire: Wire) -> None:
    @GENERATED
    @given(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")))
    def one(line: bytes) -> None:
        check_line(fresh_wire, line)

    one()


VALID_LINES = [
    request("authenticate", AUTHENTICATE, 7),
    request("session/list", {"cwd": "/w", "cursor": None}, "list"),
    request("session/load", {"sessionId": UNKNOWN, "cwd": "/w", "mcpServers": []}, 8),
    request(
        "session.page",
        {"address": {"kind": "session", "sessionId": UNKNOWN}, "throughSeq": 3, "maxMessages": 2},
        9,
    ),
    request(
        "session/prompt",
        {"sessionId": UNKNOWN, "prompt": [{"type": "text", "text": "héllo"}]},
        None,
    ),
    b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"'
    + UNKNOWN.encode()
    + b'"}}',
    b'{"jsonrpc":"2.0","id":11,"result":{"outcome":{"outcome":"cancelled"}}}',
]


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    """A valid frame with a few bytes flipped, cut, inserted or repeated."""
    line = bytearray(draw(st.sampled_from(VALID_LINES)))
    for _ in range(draw(st.integers(1, 3))):
        if not line:
            break
        at = draw(st.integers(0, len(line) - 1))
        kind = draw(st.sampled_from(["flip", "cut", "insert", "repeat", "truncate"]))
        if kind == "flip":
            line[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del line[at : at + draw(st.integers(1, 8))]
        elif kind == "insert":
            line[at:at] = draw(
                st.binary(min_size=1, max_size=4)
                | st.sampled_from([b'"', b"{", b"}", b"[", b",", b":", b"\\", b"\xff", b"\xc3"])
            )
        elif kind == "repeat":
            line[at:at] = line[at : at + draw(st.integers(1, 16))]
        else:
            del line[at:]
    return bytes(line).replace(b"\n", b"")


def test_mutated_valid_frames_get_the_answer_json_rpc_prescribes(fresh_wire: Wire) -> None:
    @GENERATED
    @given(mutated_lines())
    def one(line: bytes) -> None:
        check_line(fresh_wire, line)

    one()
