"""`edit_file`, `list_directory`, `glob` and `grep` in a prompt turn through the real server
(SPEC 4.3): scripted llm-replay calls, the exact updates on the wire, the client requests each
tool made, and the session log. Every frame is held to the official ACP models when the server
closes (`PromptServer`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import ToolUse, args
from prompt_harness import (
    ALL_CAPABILITIES,
    DONE_UPDATES,
    FakeClient,
    PromptServer,
    checkpoints,
    in_progress,
    one_tool_log,
    one_tool_turn,
    permission_request,
    text_result,
)

pytestmark = pytest.mark.process


def announced(call: ToolUse, title: str, kind: str) -> dict[str, Any]:
    """The `tool_call` of a call whose path arguments are relative (so no locations yet)."""
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": call.id,
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": json.loads(call.arguments),
        "name": call.name,
    }


def failed(call: ToolUse, message: str) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call.id,
        "status": "failed",
        "content": text_result(message),
        "name": call.name,
    }


def error_log(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def completed(call: ToolUse, result: dict[str, Any]) -> dict[str, Any]:
    """The closing update of a call whose logged result is `result` (with text content)."""
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call.id,
        "status": "completed",
        "content": [
            {"type": "diff", **{k: v for k, v in c.items() if k != "type"}}
            if c["type"] == "diff"
            else {"type": "content", "content": c}
            for c in result["content"]
        ],
        "rawOutput": result["rawOutput"],
        "name": call.name,
    }
    if "locations" in result:
        update["locations"] = result["locations"]
    return update


# -- edit_file ---------------------------------------------------------------------------------

EDIT = ToolUse("call_edit", "edit_file", args(path="notes.txt", oldText="two", newText="2"))
EDIT_PERMISSION = permission_request(
    "call_edit", "Edit notes.txt", "edit", {"path": "notes.txt", "oldText": "two", "newText": "2"}
)


def test_a_unique_edit_asks_then_rewrites_the_file_with_a_diff_and_its_line(
    tmp_path: Path,
) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_tool_turn(EDIT), client=client) as server:
        (server.workspace / "notes.txt").write_text("one\ntwo\nthree\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        assert answered.requests == [EDIT_PERMISSION]
        assert (server.workspace / "notes.txt").read_text() == "one\n2\nthree\n"
        result = {
            "content": [
                {"type": "text", "text": "Edited <cwd>/notes.txt: 1 replacement (line 2)."},
                {
                    "type": "diff",
                    "path": "<cwd>/notes.txt",
                    "newText": "one\n2\nthree\n",
                    "oldText": "one\ntwo\nthree\n",
                },
            ],
            "rawOutput": {"path": "<cwd>/notes.txt", "replacements": 1, "lines": [2]},
            "locations": [{"path": "<cwd>/notes.txt", "line": 2}],
        }
        assert answered.updates == [
            announced(EDIT, "Edit notes.txt", "edit"),
            in_progress("call_edit", "edit_file"),
            completed(EDIT, result),
            *DONE_UPDATES,
        ]
        checkpoint = checkpoints("<cwd>/notes.txt", "one\ntwo\nthree\n", "one\n2\nthree\n")
        assert server.log(session) == one_tool_log(EDIT, {**result, **checkpoint}, "allow_once")


def test_an_ambiguous_edit_is_an_error_naming_the_lines_and_nothing_is_asked(
    tmp_path: Path,
) -> None:
    call = ToolUse("call_edit", "edit_file", args(path="notes.txt", oldText="x =", newText="y ="))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        (server.workspace / "notes.txt").write_text("x = 1\nprint(x)\nx = 2\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = (
            "oldText occurs 2 times in <cwd>/notes.txt (lines 1, 3): include more surrounding "
            "text to make it unique, or set replaceAll to replace every occurrence"
        )
        assert answered.stop_reason == "end_turn"
        assert answered.requests == []
        assert (server.workspace / "notes.txt").read_text() == "x = 1\nprint(x)\nx = 2\n"
        assert answered.updates == [
            announced(call, "Edit notes.txt", "edit"),
            failed(call, message),
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(call, error_log(message))


def test_replace_all_edits_every_occurrence_and_names_each_line(tmp_path: Path) -> None:
    call = ToolUse(
        "call_edit",
        "edit_file",
        args(path="notes.txt", oldText="x =", newText="y =", replaceAll=True),
    )
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_tool_turn(call), client=client) as server:
        (server.workspace / "notes.txt").write_text("x = 1\nprint(x)\nx = 2\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert (server.workspace / "notes.txt").read_text() == "y = 1\nprint(x)\ny = 2\n"
        closing = answered.updates[2]
        assert (closing["status"], closing["locations"], closing["rawOutput"]) == (
            "completed",
            [{"path": "<cwd>/notes.txt", "line": 1}, {"path": "<cwd>/notes.txt", "line": 3}],
            {"path": "<cwd>/notes.txt", "replacements": 2, "lines": [1, 3]},
        )


def test_an_edit_goes_through_the_clients_buffer_when_it_offers_fs(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(
        tmp_path, one_tool_turn(EDIT), capabilities=ALL_CAPABILITIES, client=client
    ) as server:
        notes = str(server.workspace / "notes.txt")
        client.files[notes] = "unsaved\ntwo\n"
        (server.workspace / "notes.txt").write_text("on disk\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.stop_reason == "end_turn"
        # Read and worked out first: an edit that cannot apply is refused before asking. Read
        # again after the answer: the user may have changed the buffer while asked.
        read = {
            "method": "fs/read_text_file",
            "params": {"sessionId": "<session>", "path": "<cwd>/notes.txt"},
        }
        assert answered.requests == [
            read,
            EDIT_PERMISSION,
            read,
            {
                "method": "fs/write_text_file",
                "params": {
                    "sessionId": "<session>",
                    "path": "<cwd>/notes.txt",
                    "content": "unsaved\n2\n",
                },
            },
        ]
        assert client.files == {notes: "unsaved\n2\n"}
        assert (server.workspace / "notes.txt").read_text() == "on disk\n"
        result = {
            "content": [
                {"type": "text", "text": "Edited <cwd>/notes.txt: 1 replacement (line 2)."},
                {
                    "type": "diff",
                    "path": "<cwd>/notes.txt",
                    "newText": "unsaved\n2\n",
                    "oldText": "unsaved\ntwo\n",
                },
            ],
            "rawOutput": {"path": "<cwd>/notes.txt", "replacements": 1, "lines": [2]},
            "locations": [{"path": "<cwd>/notes.txt", "line": 2}],
        }
        assert answered.updates[2] == completed(EDIT, result)
        # What the edit replaced is the buffer's text: the checkpoint keeps that.
        checkpoint = checkpoints("<cwd>/notes.txt", "unsaved\ntwo\n", "unsaved\n2\n")
        assert server.log(session) == one_tool_log(EDIT, {**result, **checkpoint}, "allow_once")


def test_an_edit_escaping_the_session_with_dotdot_is_refused_before_asking(
    tmp_path: Path,
) -> None:
    call = ToolUse("call_edit", "edit_file", args(path="../secret.txt", oldText="a", newText="b"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        (server.tmp / "secret.txt").write_text("a\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = (
            "refused: ../secret.txt (resolved to <tmp>/secret.txt) is outside the session's "
            "directories (allowed: <cwd>)"
        )
        assert answered.requests == []
        assert (server.tmp / "secret.txt").read_text() == "a\n"
        assert answered.updates == [
            announced(call, "Edit ../secret.txt", "edit"),
            failed(call, message),
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(call, error_log(message))


def test_an_edit_through_a_symlink_leading_outside_is_refused(tmp_path: Path) -> None:
    call = ToolUse("call_edit", "edit_file", args(path="link.txt", oldText="a", newText="b"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        (server.tmp / "secret.txt").write_text("a\n")
        (server.workspace / "link.txt").symlink_to(server.tmp / "secret.txt")
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = (
            "refused: link.txt (resolved to <tmp>/secret.txt) is outside the session's "
            "directories (allowed: <cwd>)"
        )
        assert (answered.requests, answered.updates[1]) == ([], failed(call, message))
        assert (server.tmp / "secret.txt").read_text() == "a\n"


def test_an_edit_of_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    call = ToolUse("call_edit", "edit_file", args(path="blob.bin", oldText="a", newText="b"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        (server.workspace / "blob.bin").write_bytes(b"a\xff\x00")
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = "refused: blob.bin is not UTF-8 text, which edit_file would corrupt"
        assert (answered.requests, answered.updates[1]) == ([], failed(call, message))
        assert (server.workspace / "blob.bin").read_bytes() == b"a\xff\x00"


# -- list_directory ----------------------------------------------------------------------------


def test_list_directory_shows_sorted_entries_and_leaves_ignored_ones_out(tmp_path: Path) -> None:
    call = ToolUse("call_list", "list_directory", args(path="."))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        (server.workspace / ".gitignore").write_text("*.log\n")
        (server.workspace / "src").mkdir()
        (server.workspace / "app.py").write_text("print()\n")
        (server.workspace / "debug.log").write_text("noise\n")
        session = server.new_session()
        answered = server.prompt(session, "go")

        text = (
            "[dir]  src/\n[file] .gitignore (6 bytes)\n[file] app.py (8 bytes)\n"
            "[1 ignored entries not shown]"
        )
        result = {
            "content": [{"type": "text", "text": text}],
            "rawOutput": {
                "path": "<cwd>",
                "entries": [
                    {"name": "src", "type": "dir"},
                    {"name": ".gitignore", "type": "file", "size": 6},
                    {"name": "app.py", "type": "file", "size": 8},
                ],
                "ignored": 1,
                "truncated": False,
            },
        }
        assert answered.stop_reason == "end_turn"
        assert answered.requests == []
        assert answered.updates == [
            announced(call, "List .", "read"),
            in_progress("call_list", "list_directory"),
            completed(call, result),
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(call, result)


def test_list_directory_caps_a_long_listing_with_a_note(tmp_path: Path) -> None:
    call = ToolUse("call_list", "list_directory", args(path="many"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        many = server.workspace / "many"
        many.mkdir()
        for index in range(1001):
            (many / f"f{index:04}").write_bytes(b"")
        session = server.new_session()
        answered = server.prompt(session, "go")

        closing = answered.updates[2]
        lines = closing["content"][0]["content"]["text"].split("\n")
        assert (len(lines), lines[-2], lines[-1]) == (
            1001,
            "[file] f0999 (0 bytes)",
            "[capped: showing the first 1000 of 1001 entries; list a subdirectory, or use glob]",
        )
        assert closing["rawOutput"]["truncated"] is True


def test_listing_a_symlink_to_a_directory_outside_is_refused(tmp_path: Path) -> None:
    call = ToolUse("call_list", "list_directory", args(path="link"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        (server.tmp / "outside").mkdir()
        (server.workspace / "link").symlink_to(server.tmp / "outside")
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = (
            "refused: link (resolved to <tmp>/outside) is outside the session's directories "
            "(allowed: <cwd>)"
        )
        assert answered.updates == [
            announced(call, "List link", "read"),
            failed(call, message),
            *DONE_UPDATES,
        ]


# -- glob --------------------------------------------------------------------------------------


def test_glob_lists_matching_files_newest_first_without_ignored_ones(tmp_path: Path) -> None:
    call = ToolUse("call_glob", "glob", args(pattern="**/*.py"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        workspace = server.workspace
        (workspace / ".gitignore").write_text("build/\n")
        (workspace / "src").mkdir()
        (workspace / "build").mkdir()
        for name, mtime in [("a.py", 1_000), ("src/b.py", 2_000), ("build/gen.py", 3_000)]:
            (workspace / name).write_text("")
            os.utime(workspace / name, (mtime, mtime))
        (workspace / "notes.txt").write_text("")
        session = server.new_session()
        answered = server.prompt(session, "go")

        result = {
            "content": [{"type": "text", "text": "src/b.py\na.py"}],
            "rawOutput": {"paths": ["src/b.py", "a.py"], "count": 2, "truncated": False},
        }
        assert answered.updates == [
            announced(call, "Find **/*.py", "search"),
            in_progress("call_glob", "glob"),
            completed(call, result),
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(call, result)


def test_glob_below_an_absolute_path_outside_the_session_is_refused(tmp_path: Path) -> None:
    call = ToolUse("call_glob", "glob", args(pattern="*", path="/etc"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = "refused: /etc is outside the session's directories (allowed: <cwd>)"
        assert answered.updates == [
            announced(call, "Find * in /etc", "search"),
            failed(call, message),
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(call, error_log(message))


# -- grep --------------------------------------------------------------------------------------


def grep_workspace(workspace: Path, outside: Path) -> None:
    """Two matching text files, and matches grep must not show: in an ignored file, a binary
    file and a file reached through a symlink leading outside the session."""
    (workspace / ".gitignore").write_text("*.log\n")
    (workspace / "a.py").write_text("x = 1\n# TODO one\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "b.py").write_text("TODO two\n")
    (workspace / "ignored.log").write_text("TODO hidden\n")
    (workspace / "bin.dat").write_bytes(b"TODO\x00binary\n")
    outside.mkdir()
    (outside / "secret.txt").write_text("TODO secret\n")
    (workspace / "leak.txt").symlink_to(outside / "secret.txt")


def test_grep_shows_hits_with_their_locations_skipping_ignored_binary_and_outside_files(
    tmp_path: Path,
) -> None:
    call = ToolUse("call_grep", "grep", args(pattern="TODO"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        grep_workspace(server.workspace, server.tmp / "outside")
        session = server.new_session()
        answered = server.prompt(session, "go")

        result = {
            "content": [{"type": "text", "text": "a.py:2:# TODO one\nsrc/b.py:1:TODO two"}],
            "rawOutput": {"matches": 2, "files": 2, "truncated": False},
            "locations": [
                {"path": "<cwd>/a.py", "line": 2},
                {"path": "<cwd>/src/b.py", "line": 1},
            ],
        }
        assert answered.stop_reason == "end_turn"
        assert answered.requests == []
        assert answered.updates == [
            announced(call, "Search TODO", "search"),
            in_progress("call_grep", "grep"),
            completed(call, result),
            *DONE_UPDATES,
        ]
        assert server.log(session) == one_tool_log(call, result)


def test_grep_caps_at_max_results_with_a_note(tmp_path: Path) -> None:
    call = ToolUse("call_grep", "grep", args(pattern="TODO", maxResults=1))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        grep_workspace(server.workspace, server.tmp / "outside")
        session = server.new_session()
        answered = server.prompt(session, "go")

        text = (
            "a.py:2:# TODO one\n[capped: showing the first 1 matches; narrow the pattern or "
            "path, or raise maxResults]"
        )
        assert answered.updates[2] == completed(
            call,
            {
                "content": [{"type": "text", "text": text}],
                "rawOutput": {"matches": 1, "files": 1, "truncated": True},
                "locations": [{"path": "<cwd>/a.py", "line": 2}],
            },
        )


def test_grep_with_an_invalid_pattern_is_an_error_result(tmp_path: Path) -> None:
    call = ToolUse("call_grep", "grep", args(pattern="(unclosed"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = "invalid regular expression '(unclosed': missing ): (unclosed"
        assert answered.updates[2:] == [failed(call, message), *DONE_UPDATES]


def test_a_load_replays_the_hits_as_the_closing_updates_locations(tmp_path: Path) -> None:
    call = ToolUse("call_grep", "grep", args(pattern="TODO", path="src"))
    with PromptServer(tmp_path, one_tool_turn(call)) as server:
        grep_workspace(server.workspace, server.tmp / "outside")
        session = server.new_session()
        live = server.prompt(session, "go")
        loaded = server.request(
            "session/load",
            {"sessionId": session, "cwd": str(server.workspace), "mcpServers": []},
        )

        closing = [
            u
            for u in loaded.updates
            if u["sessionUpdate"] == "tool_call_update" and u["status"] == "completed"
        ]
        assert closing == [live.updates[2]]
        assert closing[0]["locations"] == [{"path": "<cwd>/src/b.py", "line": 1}]
