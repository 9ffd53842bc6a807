"""Tool calls in a prompt turn through the real server (SPEC 4.1, 4.3).

Every scenario here is one turn of two model calls: a step that calls one tool, then a step that
answers "Done.". Each test asserts the exact updates on the wire, the client requests the tool
made (through the client's `fs`/`terminal` capabilities, or none with the local fallback), the
stop reason, and the exact session log, whose only varying part is the `tool/result`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args
from prompt_harness import (
    ALL_CAPABILITIES,
    DONE,
    DONE_UPDATES,
    FakeClient,
    PromptServer,
    checkpoints,
    in_progress,
    one_tool_log,
    one_tool_turn,
    permission_request,
    replace_strings,
    text_result,
)

pytestmark = pytest.mark.process

NOTES = [{"path": "<cwd>/notes.txt"}]
"""The locations of a call that touched notes.txt, once its result names it absolutely."""


# -- read_file ---------------------------------------------------------------------------------

READ = ToolUse("call_read", "read_file", args(path="notes.txt"))
READ_ANNOUNCED = {
    "sessionUpdate": "tool_call",
    "toolCallId": "call_read",
    "title": "Read notes.txt",
    "kind": "read",
    "status": "pending",
    "rawInput": {"path": "notes.txt"},
    "name": "read_file",
}


def test_read_file_goes_through_fs_read_text_file_when_the_client_offers_it(tmp_path: Path) -> None:
    with PromptServer(tmp_path, one_tool_turn(READ), capabilities=ALL_CAPABILITIES) as server:
        server.client.files[str(server.workspace / "notes.txt")] = "unsaved buffer\n"
        (server.workspace / "notes.txt").write_text("on disk\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        assert answered.requests == [
            {
                "method": "fs/read_text_file",
                "params": {"sessionId": "<session>", "path": "<cwd>/notes.txt"},
            }
        ]
        result = {
            "content": [{"type": "text", "text": "unsaved buffer\n"}],
            "rawOutput": {"path": "<cwd>/notes.txt", "truncated": False},
            "locations": NOTES,
        }
        assert answered.updates == [
            READ_ANNOUNCED,
            in_progress("call_read", "read_file"),
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_read",
                "status": "completed",
                "content": text_result("unsaved buffer\n"),
                "locations": NOTES,
                "rawOutput": result["rawOutput"],
                "name": "read_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(READ, result)


def test_read_file_reads_the_workspace_itself_without_the_capability(tmp_path: Path) -> None:
    with PromptServer(tmp_path, one_tool_turn(READ)) as server:
        (server.workspace / "notes.txt").write_text("on disk\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        assert answered.requests == []
        result = {
            "content": [{"type": "text", "text": "on disk\n"}],
            "rawOutput": {"path": "<cwd>/notes.txt", "truncated": False},
            "locations": NOTES,
        }
        assert answered.updates == [
            READ_ANNOUNCED,
            in_progress("call_read", "read_file"),
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_read",
                "status": "completed",
                "content": text_result("on disk\n"),
                "locations": NOTES,
                "rawOutput": result["rawOutput"],
                "name": "read_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(READ, result)


# -- write_file --------------------------------------------------------------------------------

WRITE = ToolUse("call_write", "write_file", args(path="notes.txt", content="new text\n"))
WRITE_ANNOUNCED = {
    "sessionUpdate": "tool_call",
    "toolCallId": "call_write",
    "title": "Write notes.txt",
    "kind": "edit",
    "status": "pending",
    "rawInput": {"path": "notes.txt", "content": "new text\n"},
    "name": "write_file",
}
WRITE_PERMISSION = permission_request(
    "call_write", "Write notes.txt", "edit", {"path": "notes.txt", "content": "new text\n"}
)


def test_write_file_asks_then_goes_through_the_clients_fs_methods(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(
        tmp_path, one_tool_turn(WRITE), capabilities=ALL_CAPABILITIES, client=client
    ) as server:
        notes = str(server.workspace / "notes.txt")
        client.files[notes] = "old\n"
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        assert answered.requests == [
            WRITE_PERMISSION,
            {
                "method": "fs/read_text_file",
                "params": {"sessionId": "<session>", "path": "<cwd>/notes.txt"},
            },
            {
                "method": "fs/write_text_file",
                "params": {
                    "sessionId": "<session>",
                    "path": "<cwd>/notes.txt",
                    "content": "new text\n",
                },
            },
        ]
        assert client.files == {notes: "new text\n"}
        assert not (server.workspace / "notes.txt").exists()
        summary = "Wrote <cwd>/notes.txt: 9 bytes (was 4)."
        raw_output = {"path": "<cwd>/notes.txt", "created": False, "bytes": 9}
        assert answered.updates == [
            WRITE_ANNOUNCED,
            in_progress("call_write", "write_file"),
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_write",
                "status": "completed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": summary}},
                    {
                        "type": "diff",
                        "path": "<cwd>/notes.txt",
                        "newText": "new text\n",
                        "oldText": "old\n",
                    },
                ],
                "locations": NOTES,
                "rawOutput": raw_output,
                "name": "write_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            WRITE,
            {
                "content": [
                    {"type": "text", "text": summary},
                    {
                        "type": "diff",
                        "path": "<cwd>/notes.txt",
                        "newText": "new text\n",
                        "oldText": "old\n",
                    },
                ],
                "rawOutput": raw_output,
                "locations": NOTES,
                **checkpoints("<cwd>/notes.txt", "old\n", "new text\n"),
            },
            "allow_once",
        )


def test_write_file_asks_then_writes_the_workspace_itself_without_the_capability(
    tmp_path: Path,
) -> None:
    call = ToolUse("call_write", "write_file", args(path="out/new.txt", content="hello\n"))
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_tool_turn(call), client=client) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        assert answered.requests == [
            permission_request(
                "call_write",
                "Write out/new.txt",
                "edit",
                {"path": "out/new.txt", "content": "hello\n"},
            )
        ]
        assert (server.workspace / "out" / "new.txt").read_text() == "hello\n"
        summary = "Created <cwd>/out/new.txt (6 bytes)."
        diff = {"type": "diff", "path": "<cwd>/out/new.txt", "newText": "hello\n", "oldText": None}
        raw_output = {"path": "<cwd>/out/new.txt", "created": True, "bytes": 6}
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_write",
                "title": "Write out/new.txt",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"path": "out/new.txt", "content": "hello\n"},
                "name": "write_file",
            },
            in_progress("call_write", "write_file"),
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_write",
                "status": "completed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": summary}},
                    diff,
                ],
                "locations": [{"path": "<cwd>/out/new.txt"}],
                "rawOutput": raw_output,
                "name": "write_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            call,
            {
                "content": [{"type": "text", "text": summary}, diff],
                "rawOutput": raw_output,
                "locations": [{"path": "<cwd>/out/new.txt"}],
                **checkpoints("<cwd>/out/new.txt", None, "hello\n"),
            },
            "allow_once",
        )


# -- run_command -------------------------------------------------------------------------------


def test_run_command_runs_in_a_client_terminal_when_offered(tmp_path: Path) -> None:
    call = ToolUse("call_run", "run_command", args(command="make", args=["test"]))
    client = FakeClient(permissions=["allow_once"], terminal_output="all green\n")
    with PromptServer(
        tmp_path, one_tool_turn(call), capabilities=ALL_CAPABILITIES, client=client
    ) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        terminal = {"sessionId": "<session>", "terminalId": "term-1"}
        assert answered.requests == [
            permission_request(
                "call_run", "Run make test", "execute", {"command": "make", "args": ["test"]}
            ),
            {
                "method": "terminal/create",
                "params": {
                    "sessionId": "<session>",
                    "command": "make",
                    "args": ["test"],
                    "cwd": "<cwd>",
                    "outputByteLimit": 65536,
                },
            },
            {"method": "terminal/wait_for_exit", "params": terminal},
            {"method": "terminal/output", "params": terminal},
            {"method": "terminal/release", "params": terminal},
        ]
        raw_output = {"exitCode": 0, "signal": None, "truncated": False, "timedOut": False}
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_run",
                "title": "Run make test",
                "kind": "execute",
                "status": "pending",
                "rawInput": {"command": "make", "args": ["test"]},
                "name": "run_command",
            },
            {
                **in_progress("call_run", "run_command"),
                "content": [{"type": "terminal", "terminalId": "term-1"}],
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_run",
                "status": "completed",
                "content": text_result("all green\n[exit code 0]"),
                "rawOutput": raw_output,
                "name": "run_command",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            call,
            {
                "content": [{"type": "text", "text": "all green\n[exit code 0]"}],
                "rawOutput": raw_output,
            },
            "allow_once",
        )


def test_run_command_runs_the_program_itself_in_cwd_without_the_capability(tmp_path: Path) -> None:
    # The interpreter running the tests is the one program surely present; its path shows in
    # the title and input, normalized to <python>. The script's relative path and its output
    # show that the program runs in the session's cwd.
    call = ToolUse("call_run", "run_command", args(command=sys.executable, args=["where.py"]))
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_tool_turn(call), client=client) as server:
        (server.workspace / "where.py").write_text("import os\nprint(os.getcwd())\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        raw_input = {"command": "<python>", "args": ["where.py"]}
        assert replace_python(answered.requests) == [
            permission_request("call_run", "Run <python> where.py", "execute", raw_input)
        ]
        raw_output = {"exitCode": 0, "signal": None, "truncated": False, "timedOut": False}
        assert replace_python(answered.updates) == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_run",
                "title": "Run <python> where.py",
                "kind": "execute",
                "status": "pending",
                "rawInput": raw_input,
                "name": "run_command",
            },
            in_progress("call_run", "run_command"),
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_run",
                "status": "completed",
                "content": text_result("<cwd>\n[exit code 0]"),
                "rawOutput": raw_output,
                "name": "run_command",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            call,
            {
                "content": [{"type": "text", "text": "<cwd>\n[exit code 0]"}],
                "rawOutput": raw_output,
            },
            "allow_once",
        )


def test_a_command_that_fails_is_a_failed_result_with_its_output(tmp_path: Path) -> None:
    call = ToolUse(
        "call_run",
        "run_command",
        args(command=sys.executable, args=["-c", "import sys; sys.exit('no such target')"]),
    )
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_tool_turn(call), client=client) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        raw_output = {"exitCode": 1, "signal": None, "truncated": False, "timedOut": False}
        assert answered.updates[2] == {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_run",
            "status": "failed",
            "content": text_result("no such target\n[exit code 1]"),
            "rawOutput": raw_output,
            "name": "run_command",
        }
        result = {
            "content": [{"type": "text", "text": "no such target\n[exit code 1]"}],
            "isError": True,
            "rawOutput": raw_output,
        }
        assert server.log(session) == one_tool_log(call, result, "allow_once")


def replace_python(value: Any) -> Any:
    return replace_strings(value, [(sys.executable, "<python>")])


# -- permissions -------------------------------------------------------------------------------


def test_allow_always_holds_for_the_tool_for_the_rest_of_the_session(tmp_path: Path) -> None:
    first = ToolUse("call_a", "write_file", args(path="a.txt", content="A"))
    second = ToolUse("call_b", "write_file", args(path="b.txt", content="B"))
    steps = [Step(calls=[first]), Step(calls=[second]), DONE]
    client = FakeClient(permissions=["allow_always"])
    with PromptServer(tmp_path, Scenario([("go", steps)]), client=client) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        assert answered.requests == [
            permission_request("call_a", "Write a.txt", "edit", {"path": "a.txt", "content": "A"})
        ]
        assert (server.workspace / "a.txt").read_text() == "A"
        assert (server.workspace / "b.txt").read_text() == "B"
        statuses = [
            (u["toolCallId"], u["status"])
            for u in answered.updates
            if u["sessionUpdate"].startswith("tool_call")
        ]
        assert statuses == [
            ("call_a", "pending"),
            ("call_a", "in_progress"),
            ("call_a", "completed"),
            ("call_b", "pending"),
            ("call_b", "in_progress"),
            ("call_b", "completed"),
        ]
        results = [e["data"] for e in server.log(session) if e["type"] == "tool/result"]
        assert results == [
            {
                "turn": 0,
                "step": 0,
                "callId": "call_a",
                "content": [
                    {"type": "text", "text": "Created <cwd>/a.txt (1 bytes)."},
                    {"type": "diff", "path": "<cwd>/a.txt", "newText": "A", "oldText": None},
                ],
                "rawOutput": {"path": "<cwd>/a.txt", "created": True, "bytes": 1},
                "locations": [{"path": "<cwd>/a.txt"}],
                **checkpoints("<cwd>/a.txt", None, "A"),
            },
            {
                "turn": 0,
                "step": 1,
                "callId": "call_b",
                "content": [
                    {"type": "text", "text": "Created <cwd>/b.txt (1 bytes)."},
                    {"type": "diff", "path": "<cwd>/b.txt", "newText": "B", "oldText": None},
                ],
                "rawOutput": {"path": "<cwd>/b.txt", "created": True, "bytes": 1},
                "locations": [{"path": "<cwd>/b.txt"}],
                **checkpoints("<cwd>/b.txt", None, "B"),
            },
        ]


def test_reject_once_gives_the_model_an_error_result_and_the_turn_goes_on(tmp_path: Path) -> None:
    client = FakeClient(permissions=["reject_once"])
    with PromptServer(tmp_path, one_tool_turn(WRITE), client=client) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        assert answered.requests == [WRITE_PERMISSION]
        assert not (server.workspace / "notes.txt").exists()
        assert answered.updates == [
            WRITE_ANNOUNCED,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_write",
                "status": "failed",
                "content": text_result("the user rejected this tool call"),
                "name": "write_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            WRITE,
            {
                "content": [{"type": "text", "text": "the user rejected this tool call"}],
                "isError": True,
            },
            "reject_once",
        )


def test_a_permission_request_the_client_cancels_is_an_error_result(tmp_path: Path) -> None:
    client = FakeClient(permissions=["cancelled"])
    with PromptServer(tmp_path, one_tool_turn(WRITE), client=client) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        assert answered.requests == [WRITE_PERMISSION]
        assert answered.updates == [
            WRITE_ANNOUNCED,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_write",
                "status": "failed",
                "content": text_result("permission request cancelled"),
                "name": "write_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            WRITE,
            {
                "content": [{"type": "text", "text": "permission request cancelled"}],
                "isError": True,
            },
            "cancelled",
        )


# -- refusals ----------------------------------------------------------------------------------

ESCAPE = ToolUse("call_escape", "read_file", args(path="../secret.txt"))


def test_reading_a_path_outside_cwd_is_refused(tmp_path: Path) -> None:
    with PromptServer(tmp_path, one_tool_turn(ESCAPE)) as server:
        (server.tmp / "secret.txt").write_text("secret\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        refusal = "refused: ../secret.txt (resolved to <tmp>/secret.txt) is outside the session's directories (allowed: <cwd>)"
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_escape",
                "title": "Read ../secret.txt",
                "kind": "read",
                "status": "pending",
                "rawInput": {"path": "../secret.txt"},
                "name": "read_file",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_escape",
                "status": "failed",
                "content": text_result(refusal),
                "name": "read_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            ESCAPE, {"content": [{"type": "text", "text": refusal}], "isError": True}
        )


def test_a_symlink_leading_outside_cwd_is_refused(tmp_path: Path) -> None:
    call = ToolUse("call_link", "read_file", args(path="link/secret.txt"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        (server.tmp / "outside").mkdir()
        (server.tmp / "outside" / "secret.txt").write_text("secret\n")
        (server.workspace / "link").symlink_to(server.tmp / "outside")
        session = server.new_session()
        answered = server.prompt(session, "go")

        refusal = "refused: link/secret.txt (resolved to <tmp>/outside/secret.txt) is outside the session's directories (allowed: <cwd>)"
        assert answered.stop_reason == "end_turn"
        assert answered.updates[1:] == [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_link",
                "status": "failed",
                "content": text_result(refusal),
                "name": "read_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            call, {"content": [{"type": "text", "text": refusal}], "isError": True}
        )


def test_writing_outside_cwd_through_the_client_is_refused_before_asking(tmp_path: Path) -> None:
    call = ToolUse("call_escape", "write_file", args(path="/etc/passwd", content="x"))
    with PromptServer(tmp_path, one_tool_turn(call), capabilities=ALL_CAPABILITIES) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        refusal = "refused: /etc/passwd is outside the session's directories (allowed: <cwd>)"
        assert answered.stop_reason == "end_turn"
        assert answered.requests == []
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_escape",
                "title": "Write /etc/passwd",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"path": "/etc/passwd", "content": "x"},
                "locations": [{"path": "/etc/passwd"}],
                "name": "write_file",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_escape",
                "status": "failed",
                "content": text_result(refusal),
                "name": "write_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            call, {"content": [{"type": "text", "text": refusal}], "isError": True}
        )


def test_an_unknown_tool_is_an_error_result(tmp_path: Path) -> None:
    call = ToolUse("call_x", "delete_everything", args(path="/"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = (
            "unknown tool 'delete_everything'; the tools are: read_file, write_file, "
            "run_command, todo_write, task, edit_file, list_directory, glob, grep, "
            "search_history"
        )
        assert answered.stop_reason == "end_turn"
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_x",
                "title": "delete_everything",
                "kind": "other",
                "status": "pending",
                "rawInput": {"path": "/"},
                "name": "delete_everything",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_x",
                "status": "failed",
                "content": text_result(message),
                "name": "delete_everything",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            call, {"content": [{"type": "text", "text": message}], "isError": True}
        )


def test_arguments_that_are_not_json_are_an_error_result(tmp_path: Path) -> None:
    call = ToolUse("call_bad", "read_file", '{"path": "notes.txt"')
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = "invalid arguments for read_file: not valid JSON (Input data was truncated)"
        assert answered.stop_reason == "end_turn"
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_bad",
                "title": "read_file",
                "kind": "read",
                "status": "pending",
                "rawInput": '{"path": "notes.txt"',
                "name": "read_file",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_bad",
                "status": "failed",
                "content": text_result(message),
                "name": "read_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            call, {"content": [{"type": "text", "text": message}], "isError": True}
        )


def test_arguments_that_do_not_fit_the_tool_are_an_error_result_naming_the_field(
    tmp_path: Path,
) -> None:
    call = ToolUse("call_bad", "read_file", args(path=3))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = "invalid arguments for read_file: Expected `str`, got `int` - at `$.path`"
        assert answered.stop_reason == "end_turn"
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_bad",
                "title": "read_file",
                "kind": "read",
                "status": "pending",
                "rawInput": {"path": 3},
                "name": "read_file",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_bad",
                "status": "failed",
                "content": text_result(message),
                "name": "read_file",
            },
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(
            call, {"content": [{"type": "text", "text": message}], "isError": True}
        )
