"""The agent's tools (SPEC 4.3), against an in-memory client and real temporary directories.

The fake client records every request and answers from a script (a value, an exception to
raise, or an async function of the params), so each test states exactly which requests a
tool call makes and what it makes of the answers.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import stat
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import msgspec
import pytest
from msgspec import UNSET
from polling import poll, wait_for

from acp_server.agent.beneath import openat2
from acp_server.agent.confinement import (
    PathRefused,
    absolute_path,
    client_path,
    ensure_inside,
    is_inside,
    local_path,
    non_regular_kind,
)
from acp_server.agent.ports import ClientCapabilities, ClientRequestError
from acp_server.agent.tools import (
    BUILTIN_TOOLS,
    PERMISSION_OPTIONS,
    TaskArgs,
    ToolContext,
    ToolLimits,
    ToolOutcome,
    invalid_arguments,
    run_tool,
)
from acp_server.agent.tools.base import FileChange
from acp_server.agent.tools.excerpts import (
    LOSSY_NOTE,
    Excerpt,
    complete_utf8_prefix,
    complete_utf8_suffix,
    decode_utf8,
    join_notes,
    read_excerpt,
    render_excerpt,
)
from acp_server.core.acp_updates import ToolCallContent, ToolTerminal
from acp_server.core.content import DiffContent, TextContent
from acp_server.core.events import PlanEntry, ToolCallLocation


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SESSION = "sess-1"
CALL = "call-1"
PY = sys.executable

# ---------------------------------------------------------------------------------------------
# The fake client and helpers.

Answer = Any  # a value, a BaseException to raise, or an async callable taking the params


class FakeClient:
    """A `ClientPort` that records requests and answers them from `answers[method]`."""

    def __init__(
        self,
        *,
        read: bool = False,
        write: bool = False,
        terminal: bool = False,
        answers: dict[str, Answer] | None = None,
    ) -> None:
        self.capabilities = ClientCapabilities(read, write, terminal)
        self.answers: dict[str, Answer] = dict(answers or {})
        self.requests: list[tuple[str, Any]] = []
        self.notifications: list[tuple[str, Any]] = []
        self.abandoned: list[str] = []
        self.entered = anyio.Event()

    async def request(self, method: str, params: Any) -> Any:
        self.requests.append((method, params))
        answer = self.answers[method]
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return await answer(method, params)
        return answer

    async def notify(self, method: str, params: Any) -> None:
        self.notifications.append((method, params))

    async def hang(self, method: str, params: Any) -> Any:
        """An answer that never comes: records that the request was abandoned."""
        self.entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.abandoned.append(method)

    def methods(self) -> list[str]:
        return [method for method, _ in self.requests]


def selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


ALLOW_ONCE = selected("allow_once")


class Started:
    """An `on_started` callback that counts its calls."""

    def __init__(self) -> None:
        self.count = 0
        self.content: list[list[ToolCallContent] | None] = []
        """What each call showed while it ran (None: nothing)."""

    async def __call__(self, content: list[ToolCallContent] | None = None) -> None:
        self.count += 1
        self.content.append(content)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The session's cwd (resolved, so expected paths match what the tools compute)."""
    path = tmp_path.resolve() / "work"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path.resolve() / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("secret\n")
    return path


def make_ctx(
    cwd: Path,
    client: FakeClient | None = None,
    *,
    extra: list[Path] | None = None,
    allowed: set[str] | None = None,
    limits: ToolLimits | None = None,
) -> ToolContext:
    return ToolContext(
        SESSION,
        cwd,
        extra or [],
        client or FakeClient(),
        allowed if allowed is not None else set(),
        limits or ToolLimits(),
    )


async def call(
    ctx: ToolContext, name: str, args: dict[str, Any] | str, started: Started | None = None
) -> ToolOutcome:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return await run_tool(
        BUILTIN_TOOLS,
        ctx,
        CALL,
        name,
        arguments,
        title=f"{name} title",
        kind=BUILTIN_TOOLS.present(name, {}).kind,
        on_started=started or Started(),
    )


def error(text: str) -> ToolOutcome:
    return ToolOutcome([TextContent(text)], True)


async def cancel_when_entered(
    client: FakeClient, run: Callable[[], Awaitable[ToolOutcome]]
) -> list[ToolOutcome]:
    """Run `run` and cancel it once the client's hanging answer is reached; return what `run`
    returned (nothing, when the cancellation propagated as it must)."""
    returned: list[ToolOutcome] = []

    async def go() -> None:
        returned.append(await run())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await client.entered.wait()
            tg.cancel_scope.cancel()
    return returned


# ---------------------------------------------------------------------------------------------
# Confinement: pure path rules.


def test_absolute_path_joins_a_relative_path_to_cwd() -> None:
    assert absolute_path("src/a.py", PurePosixPath("/w")) == Path("/w/src/a.py")


def test_absolute_path_keeps_an_absolute_path() -> None:
    assert absolute_path("/etc/hosts", PurePosixPath("/w")) == Path("/etc/hosts")


def test_absolute_path_folds_dot_and_dot_dot() -> None:
    assert absolute_path("./a/../../b", PurePosixPath("/w/x")) == Path("/w/b")


def test_absolute_path_refuses_an_empty_path() -> None:
    with pytest.raises(PathRefused, match=r"^the path is empty$"):
        absolute_path("", PurePosixPath("/w"))


def test_absolute_path_refuses_a_nul_character() -> None:
    with pytest.raises(PathRefused, match=r"^the path 'a\\x00b' contains a NUL character$"):
        absolute_path("a\0b", PurePosixPath("/w"))


def test_is_inside_accepts_the_root_itself() -> None:
    assert is_inside(PurePosixPath("/w"), PurePosixPath("/w")) is True


def test_is_inside_accepts_a_descendant() -> None:
    assert is_inside(PurePosixPath("/w/a/b"), PurePosixPath("/w")) is True


def test_is_inside_refuses_a_sibling_sharing_a_name_prefix() -> None:
    assert is_inside(PurePosixPath("/work2/a"), PurePosixPath("/work")) is False


def test_ensure_inside_names_the_path_what_it_became_and_the_roots() -> None:
    with pytest.raises(PathRefused) as info:
        ensure_inside(
            PurePosixPath("/etc/passwd"),
            [PurePosixPath("/w"), PurePosixPath("/x")],
            "../etc/passwd",
        )
    assert str(info.value) == (
        "refused: ../etc/passwd (resolved to /etc/passwd) is outside the session's "
        "directories (allowed: /w, /x)"
    )


def test_ensure_inside_omits_the_resolution_when_it_is_the_path_as_given() -> None:
    with pytest.raises(PathRefused) as info:
        ensure_inside(PurePosixPath("/etc/passwd"), [PurePosixPath("/w")], "/etc/passwd")
    assert str(info.value) == (
        "refused: /etc/passwd is outside the session's directories (allowed: /w)"
    )


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        (stat.S_IFREG, None),
        (stat.S_IFDIR, "a directory"),
        (stat.S_IFIFO, "a FIFO (named pipe)"),
        (stat.S_IFCHR, "a character device"),
        (stat.S_IFBLK, "a block device"),
        (stat.S_IFSOCK, "a socket"),
    ],
)
def test_non_regular_kind_names_each_file_type(mode: int, kind: str | None) -> None:
    assert non_regular_kind(mode | 0o644) == kind


def test_local_path_resolves_a_symlink_inside_cwd(work: Path) -> None:
    (work / "real.txt").write_text("x")
    (work / "link.txt").symlink_to(work / "real.txt")
    assert local_path("link.txt", work, []) == work / "real.txt"


def test_local_path_refuses_a_symlink_leading_out_of_cwd(work: Path, outside: Path) -> None:
    (work / "link").symlink_to(outside)
    with pytest.raises(PathRefused, match="is outside the session's directories"):
        local_path("link/secret.txt", work, [])


def test_client_path_accepts_a_path_spelled_with_the_resolved_cwd(work: Path) -> None:
    alias = work.parent / "alias"
    alias.symlink_to(work)
    assert client_path(str(work / "a.txt"), alias, []) == work / "a.txt"


def test_client_path_does_not_resolve_symlinks(work: Path, outside: Path) -> None:
    (work / "link").symlink_to(outside)
    assert client_path("link/secret.txt", work, []) == work / "link" / "secret.txt"


def test_tool_context_refuses_a_relative_cwd() -> None:
    with pytest.raises(ValueError, match=r"^session directories must be absolute, got work$"):
        ToolContext(SESSION, Path("work"), [], FakeClient())


# ---------------------------------------------------------------------------------------------
# Excerpts: caps, line ranges and UTF-8, without a file system.


def test_complete_utf8_prefix_drops_a_character_cut_by_the_cap() -> None:
    assert complete_utf8_prefix("abé".encode()[:3]) == b"ab"


def test_complete_utf8_prefix_keeps_a_complete_final_character() -> None:
    assert complete_utf8_prefix("ab€".encode()) == "ab€".encode()


def test_complete_utf8_suffix_drops_continuation_bytes_at_the_start() -> None:
    assert complete_utf8_suffix("€ab".encode()[1:]) == b"ab"


def test_decode_utf8_reports_replaced_bytes() -> None:
    assert decode_utf8(b"a\xffb") == ("a\ufffdb", True)


def test_join_notes_separates_notes_from_text_by_a_blank_line() -> None:
    assert join_notes("abc", ["[n1]", "[n2]"]) == "abc\n\n[n1]\n[n2]"


def test_read_excerpt_selects_lines_by_line_and_limit() -> None:
    stream = io.BytesIO(b"one\ntwo\nthree\nfour\n")
    assert read_excerpt(stream, line=2, limit=2, cap=100) == Excerpt(b"two\nthree\n", False, 1)


def test_read_excerpt_caps_one_endless_line() -> None:
    stream = io.BytesIO(b"x" * 200_000)
    assert read_excerpt(stream, line=1, limit=1, cap=10) == Excerpt(b"x" * 10, True, 0)


def test_read_excerpt_skips_lines_longer_than_its_read_chunk() -> None:
    stream = io.BytesIO(b"y" * 100_000 + b"\nsecond\n")
    assert read_excerpt(stream, line=2, limit=None, cap=100) == Excerpt(b"second\n", False, 1)


def test_render_excerpt_notes_a_line_past_the_end() -> None:
    text = render_excerpt(Excerpt(b"", False, 2), size=8, line=5, whole_file=False)
    assert text == "[line 5 is past the end of the file, which has 2 lines]"


def test_render_excerpt_notes_a_cut_line_selection() -> None:
    text = render_excerpt(Excerpt(b"abcd", True, 0), size=100, line=1, whole_file=False)
    assert text == "abcd\n\n[truncated: the selected lines are over 4 bytes, showing the first 4]"


# ---------------------------------------------------------------------------------------------
# Arguments, definitions and dispatch.


@pytest.mark.anyio
async def test_unknown_tool_is_an_error_outcome(work: Path) -> None:
    outcome = await call(make_ctx(work), "delete_everything", {})
    assert outcome == error(
        "unknown tool 'delete_everything'; the tools are: "
        "read_file, write_file, run_command, todo_write, task, edit_file, list_directory, "
        "glob, grep, search_history"
    )


@pytest.mark.anyio
async def test_task_reaching_run_tool_is_an_error_outcome(work: Path) -> None:
    outcome = await call(make_ctx(work), "task", {"prompt": "do it"})
    assert outcome == error("the task tool is not available in this session")


@pytest.mark.anyio
async def test_arguments_that_are_not_json_are_an_error_outcome(work: Path) -> None:
    outcome = await call(make_ctx(work), "read_file", '{"path": ')
    assert outcome == error(
        "invalid arguments for read_file: not valid JSON (Input data was truncated)"
    )


@pytest.mark.anyio
async def test_a_wrong_typed_field_is_named(work: Path) -> None:
    outcome = await call(make_ctx(work), "read_file", {"path": 7})
    assert outcome == error(
        "invalid arguments for read_file: Expected `str`, got `int` - at `$.path`"
    )


@pytest.mark.anyio
async def test_a_missing_field_is_named(work: Path) -> None:
    outcome = await call(make_ctx(work), "write_file", {"path": "a.txt"})
    assert outcome == error(
        "invalid arguments for write_file: Object missing required field `content`"
    )


@pytest.mark.anyio
async def test_an_unknown_field_is_named(work: Path) -> None:
    outcome = await call(make_ctx(work), "run_command", {"command": "ls", "timeout_ms": 5})
    assert outcome == error(
        "invalid arguments for run_command: Object contains unknown field `timeout_ms`"
    )


@pytest.mark.anyio
async def test_a_line_below_one_is_refused(work: Path) -> None:
    outcome = await call(make_ctx(work), "read_file", {"path": "a", "line": 0})
    assert outcome == error("invalid arguments for read_file: Expected `int` >= 1 - at `$.line`")


@pytest.mark.anyio
async def test_arguments_that_are_not_an_object_are_refused(work: Path) -> None:
    outcome = await call(make_ctx(work), "todo_write", "[]")
    assert outcome == error("invalid arguments for todo_write: Expected `object`, got `array`")


@pytest.mark.anyio
async def test_invalid_arguments_do_not_start_the_tool(work: Path) -> None:
    started = Started()
    await call(make_ctx(work), "read_file", "nope", started)
    assert started.count == 0


def test_task_arguments_decode_from_the_models_json() -> None:
    assert msgspec.json.decode('{"prompt": "sum it up"}', type=TaskArgs) == TaskArgs("sum it up")


def test_invalid_arguments_names_the_tool_and_the_field() -> None:
    try:
        msgspec.json.decode("{}", type=TaskArgs)
    except msgspec.ValidationError as exc:
        outcome = invalid_arguments("task", exc)
    assert outcome == error("invalid arguments for task: Object missing required field `prompt`")


def test_tool_definitions_name_every_tool_in_order() -> None:
    assert [d.name for d in BUILTIN_TOOLS.definitions] == [
        "read_file",
        "write_file",
        "run_command",
        "todo_write",
        "task",
        "edit_file",
        "list_directory",
        "glob",
        "grep",
        "search_history",
    ]


def test_tool_definition_schemas_are_self_contained() -> None:
    text = json.dumps([d.parameters for d in BUILTIN_TOOLS.definitions])
    assert ("$ref" in text, "$defs" in text, '"title"' in text) == (False, False, False)


def test_read_file_definition_schema() -> None:
    assert BUILTIN_TOOLS.definitions[0].parameters == {
        "type": "object",
        "properties": {
            "path": {
                "description": "The file: absolute, or relative to the working directory.",
                "type": "string",
                "minLength": 1,
            },
            "line": {
                "description": "First line to return (1-based).",
                "type": "integer",
                "minimum": 1,
            },
            "limit": {
                "description": "Maximum number of lines to return.",
                "type": "integer",
                "minimum": 1,
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_run_command_definition_requires_only_the_command() -> None:
    params = BUILTIN_TOOLS.definitions[2].parameters
    assert (sorted(params["properties"]), params["required"]) == (
        ["args", "command", "timeoutMs"],
        ["command"],
    )


# ---------------------------------------------------------------------------------------------
# read_file on the server's own file system.


@pytest.mark.anyio
async def test_read_file_reads_a_relative_path_locally(work: Path) -> None:
    (work / "a.txt").write_text("hello\n")
    outcome = await call(make_ctx(work), "read_file", {"path": "a.txt"})
    assert outcome == ToolOutcome(
        [TextContent("hello\n")],
        False,
        {"path": str(work / "a.txt"), "truncated": False},
        locations=[ToolCallLocation(str(work / "a.txt"))],
    )


@pytest.mark.anyio
async def test_read_file_reads_an_absolute_path_inside_cwd(work: Path) -> None:
    (work / "a.txt").write_text("abs")
    outcome = await call(make_ctx(work), "read_file", {"path": str(work / "a.txt")})
    assert outcome.content == [TextContent("abs")]


@pytest.mark.anyio
async def test_read_file_starts_the_tool_once(work: Path) -> None:
    (work / "a.txt").write_text("x")
    started = Started()
    await call(make_ctx(work), "read_file", {"path": "a.txt"}, started)
    assert started.count == 1


@pytest.mark.anyio
async def test_read_file_selects_lines(work: Path) -> None:
    (work / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    outcome = await call(make_ctx(work), "read_file", {"path": "a.txt", "line": 2, "limit": 2})
    assert outcome.content == [TextContent("two\nthree\n")]


@pytest.mark.anyio
async def test_read_file_limit_alone_reads_from_the_first_line(work: Path) -> None:
    (work / "a.txt").write_text("one\ntwo\nthree\n")
    outcome = await call(make_ctx(work), "read_file", {"path": "a.txt", "limit": 1})
    assert outcome.content == [TextContent("one\n")]


@pytest.mark.anyio
async def test_read_file_notes_a_line_past_the_end(work: Path) -> None:
    (work / "a.txt").write_text("one\ntwo\n")
    outcome = await call(make_ctx(work), "read_file", {"path": "a.txt", "line": 5})
    assert outcome.content == [
        TextContent("[line 5 is past the end of the file, which has 2 lines]")
    ]


@pytest.mark.anyio
async def test_read_file_notes_an_empty_file(work: Path) -> None:
    (work / "empty.txt").write_bytes(b"")
    outcome = await call(make_ctx(work), "read_file", {"path": "empty.txt"})
    assert outcome.content == [TextContent("[the file is empty]")]


@pytest.mark.anyio
async def test_read_file_caps_a_huge_file_with_a_note(work: Path) -> None:
    (work / "big.txt").write_bytes(b"a" * (1 << 20) + b"overflow")
    outcome = await call(make_ctx(work), "read_file", {"path": "big.txt"})
    assert outcome == ToolOutcome(
        [
            TextContent(
                "a" * (1 << 20)
                + "\n\n[truncated: file is 1048584 bytes, showing the first 1048576]"
            )
        ],
        False,
        {"path": str(work / "big.txt"), "truncated": True},
        locations=[ToolCallLocation(str(work / "big.txt"))],
    )


@pytest.mark.anyio
async def test_read_file_cap_never_splits_a_character(work: Path) -> None:
    (work / "a.txt").write_text("abcdé")
    ctx = make_ctx(work, limits=ToolLimits(read_bytes=5))
    outcome = await call(ctx, "read_file", {"path": "a.txt"})
    assert outcome.content == [
        TextContent("abcd\n\n[truncated: file is 6 bytes, showing the first 4]")
    ]


@pytest.mark.anyio
async def test_read_file_replaces_undecodable_bytes_and_says_so(work: Path) -> None:
    (work / "bin.dat").write_bytes(b"ok\xff\n")
    outcome = await call(make_ctx(work), "read_file", {"path": "bin.dat"})
    assert outcome.content == [TextContent("ok\ufffd\n\n" + LOSSY_NOTE)]


@pytest.mark.anyio
async def test_read_file_missing_file_is_an_error_outcome(work: Path) -> None:
    outcome = await call(make_ctx(work), "read_file", {"path": "missing.txt"})
    assert outcome == error("cannot read missing.txt: No such file or directory")


@pytest.mark.anyio
async def test_read_file_refuses_a_directory(work: Path) -> None:
    (work / "sub").mkdir()
    outcome = await call(make_ctx(work), "read_file", {"path": "sub"})
    assert outcome == error("refused: sub is a directory, not a regular file")


@pytest.mark.anyio
async def test_read_file_refuses_a_fifo_without_blocking(work: Path) -> None:
    os.mkfifo(work / "pipe")
    with anyio.fail_after(5):
        outcome = await call(make_ctx(work), "read_file", {"path": "pipe"})
    assert outcome == error("refused: pipe is a FIFO (named pipe), not a regular file")


@pytest.mark.anyio
async def test_read_file_refuses_a_device_file(work: Path) -> None:
    ctx = make_ctx(work, extra=[Path("/dev")])
    with anyio.fail_after(5):
        outcome = await call(ctx, "read_file", {"path": "/dev/zero"})
    assert outcome == error("refused: /dev/zero is a character device, not a regular file")


@pytest.mark.anyio
async def test_read_file_refuses_dot_dot_out_of_cwd(work: Path, outside: Path) -> None:
    outcome = await call(make_ctx(work), "read_file", {"path": "../outside/secret.txt"})
    assert outcome == error(
        f"refused: ../outside/secret.txt (resolved to {outside / 'secret.txt'}) is outside "
        f"the session's directories (allowed: {work})"
    )


@pytest.mark.anyio
async def test_read_file_refuses_an_absolute_path_elsewhere(work: Path, outside: Path) -> None:
    path = str(outside / "secret.txt")
    outcome = await call(make_ctx(work), "read_file", {"path": path})
    assert outcome == error(
        f"refused: {path} is outside the session's directories (allowed: {work})"
    )


@pytest.mark.anyio
async def test_read_file_refuses_a_symlink_out_of_cwd(work: Path, outside: Path) -> None:
    (work / "innocent.txt").symlink_to(outside / "secret.txt")
    outcome = await call(make_ctx(work), "read_file", {"path": "innocent.txt"})
    assert outcome == error(
        f"refused: innocent.txt (resolved to {outside / 'secret.txt'}) is outside the "
        f"session's directories (allowed: {work})"
    )


@pytest.mark.anyio
async def test_read_file_refusal_does_not_start_the_tool(work: Path, outside: Path) -> None:
    started = Started()
    await call(make_ctx(work), "read_file", {"path": str(outside / "secret.txt")}, started)
    assert started.count == 0


@pytest.mark.anyio
async def test_read_file_allows_additional_directories(work: Path, outside: Path) -> None:
    ctx = make_ctx(work, extra=[outside])
    outcome = await call(ctx, "read_file", {"path": "../outside/secret.txt"})
    assert outcome.content == [TextContent("secret\n")]


# ---------------------------------------------------------------------------------------------
# read_file through the client.


@pytest.mark.anyio
async def test_read_file_uses_the_clients_fs_when_advertised(work: Path) -> None:
    client = FakeClient(read=True, answers={"fs/read_text_file": {"content": "from editor"}})
    outcome = await call(
        make_ctx(work, client), "read_file", {"path": "a.txt", "line": 3, "limit": 2}
    )
    assert (client.requests, outcome) == (
        [
            (
                "fs/read_text_file",
                {"sessionId": SESSION, "path": str(work / "a.txt"), "line": 3, "limit": 2},
            )
        ],
        ToolOutcome(
            [TextContent("from editor")],
            False,
            {"path": str(work / "a.txt"), "truncated": False},
            locations=[ToolCallLocation(str(work / "a.txt"), 3)],
        ),
    )


@pytest.mark.anyio
async def test_read_file_via_client_omits_absent_line_and_limit(work: Path) -> None:
    client = FakeClient(read=True, answers={"fs/read_text_file": {"content": "x"}})
    await call(make_ctx(work, client), "read_file", {"path": "a.txt"})
    assert client.requests == [
        ("fs/read_text_file", {"sessionId": SESSION, "path": str(work / "a.txt")})
    ]


@pytest.mark.anyio
async def test_read_file_via_client_caps_long_content(work: Path) -> None:
    client = FakeClient(read=True, answers={"fs/read_text_file": {"content": "abcdef"}})
    ctx = make_ctx(work, client, limits=ToolLimits(read_bytes=4))
    outcome = await call(ctx, "read_file", {"path": "a.txt"})
    assert outcome.content == [
        TextContent("abcd\n\n[truncated: the client returned 6 bytes, showing the first 4]")
    ]


@pytest.mark.anyio
async def test_read_file_via_client_error_is_an_error_outcome(work: Path) -> None:
    failure = ClientRequestError("fs/read_text_file", -32000, "no such buffer")
    client = FakeClient(read=True, answers={"fs/read_text_file": failure})
    outcome = await call(make_ctx(work, client), "read_file", {"path": "a.txt"})
    assert outcome == error("fs/read_text_file: client error -32000: no such buffer")


@pytest.mark.anyio
async def test_read_file_via_client_malformed_result_is_an_error_outcome(work: Path) -> None:
    client = FakeClient(read=True, answers={"fs/read_text_file": {"text": "x"}})
    outcome = await call(make_ctx(work, client), "read_file", {"path": "a.txt"})
    assert outcome == error(
        "the client sent a malformed fs/read_text_file result: "
        "Object missing required field `content`"
    )


@pytest.mark.anyio
async def test_read_file_via_client_refuses_dot_dot_out_of_cwd_without_asking(work: Path) -> None:
    client = FakeClient(read=True, answers={"fs/read_text_file": {"content": "x"}})
    outcome = await call(make_ctx(work, client), "read_file", {"path": "../etc/passwd"})
    assert (client.requests, outcome) == (
        [],
        error(
            f"refused: ../etc/passwd (resolved to {work.parent / 'etc/passwd'}) is outside "
            f"the session's directories (allowed: {work})"
        ),
    )


# ---------------------------------------------------------------------------------------------
# Permission (through write_file and run_command).


@pytest.mark.anyio
async def test_permission_request_params(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": ALLOW_ONCE})
    await call(make_ctx(work, client), "write_file", {"path": "a.txt", "content": "x"})
    assert client.requests == [
        (
            "session/request_permission",
            {
                "sessionId": SESSION,
                "toolCall": {
                    "toolCallId": CALL,
                    "title": "write_file title",
                    "kind": "edit",
                    "status": "pending",
                    "rawInput": {"path": "a.txt", "content": "x"},
                },
                "options": [
                    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
                    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                ],
            },
        )
    ]


def test_permission_options_are_the_three_of_the_spec() -> None:
    assert [o["optionId"] for o in PERMISSION_OPTIONS] == [
        "allow_once",
        "allow_always",
        "reject_once",
    ]


@pytest.mark.anyio
async def test_allow_once_asks_again_next_time(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": ALLOW_ONCE})
    ctx = make_ctx(work, client)
    await call(ctx, "write_file", {"path": "a.txt", "content": "1"})
    await call(ctx, "write_file", {"path": "a.txt", "content": "2"})
    assert (client.methods(), ctx.allowed_always) == (
        ["session/request_permission", "session/request_permission"],
        set(),
    )


@pytest.mark.anyio
async def test_allow_always_is_remembered_and_not_asked_again(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": selected("allow_always")})
    ctx = make_ctx(work, client)
    await call(ctx, "write_file", {"path": "a.txt", "content": "1"})
    second = await call(ctx, "write_file", {"path": "a.txt", "content": "2"})
    assert (
        client.methods(),
        ctx.allowed_always,
        second.is_error,
        (work / "a.txt").read_text(),
    ) == (
        ["session/request_permission"],
        {"write_file"},
        False,
        "2",
    )


@pytest.mark.anyio
async def test_allow_always_holds_only_for_its_tool(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": selected("reject_once")})
    ctx = make_ctx(work, client, allowed={"write_file"})
    await call(ctx, "run_command", {"command": PY, "args": ["-c", "pass"]})
    assert client.methods() == ["session/request_permission"]


@pytest.mark.anyio
async def test_reject_is_an_error_outcome_and_nothing_runs(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": selected("reject_once")})
    started = Started()
    outcome = await call(
        make_ctx(work, client), "write_file", {"path": "a.txt", "content": "x"}, started
    )
    assert (outcome, started.count, (work / "a.txt").exists()) == (
        error("the user rejected this tool call"),
        0,
        False,
    )


@pytest.mark.anyio
async def test_cancelled_permission_outcome_is_an_error_outcome(work: Path) -> None:
    client = FakeClient(
        answers={"session/request_permission": {"outcome": {"outcome": "cancelled"}}}
    )
    started = Started()
    outcome = await call(
        make_ctx(work, client), "write_file", {"path": "a.txt", "content": "x"}, started
    )
    assert (outcome, started.count, (work / "a.txt").exists()) == (
        error("permission request cancelled"),
        0,
        False,
    )


@pytest.mark.anyio
async def test_malformed_permission_answer_is_an_error_outcome(work: Path) -> None:
    client = FakeClient(
        answers={"session/request_permission": {"outcome": {"outcome": "selected"}}}
    )
    outcome = await call(make_ctx(work, client), "write_file", {"path": "a.txt", "content": "x"})
    assert outcome == error(
        "the client sent a malformed permission answer: "
        "Object missing required field `optionId` - at `$.outcome`"
    )


@pytest.mark.anyio
async def test_null_permission_answer_is_an_error_outcome(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": None})
    outcome = await call(make_ctx(work, client), "write_file", {"path": "a.txt", "content": "x"})
    assert outcome == error(
        "the client sent a malformed permission answer: Expected `object`, got `null`"
    )


@pytest.mark.anyio
async def test_unknown_permission_option_is_an_error_outcome(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": selected("reject_always")})
    outcome = await call(make_ctx(work, client), "write_file", {"path": "a.txt", "content": "x"})
    assert outcome == error("the client chose an unknown permission option 'reject_always'")


@pytest.mark.anyio
async def test_permission_request_error_is_an_error_outcome(work: Path) -> None:
    failure = ClientRequestError("session/request_permission", -32603, "dialog crashed")
    client = FakeClient(answers={"session/request_permission": failure})
    outcome = await call(make_ctx(work, client), "write_file", {"path": "a.txt", "content": "x"})
    assert outcome == error("session/request_permission: client error -32603: dialog crashed")


@pytest.mark.anyio
async def test_cancellation_during_permission_propagates_and_leaves_nothing(work: Path) -> None:
    client = FakeClient()
    client.answers["session/request_permission"] = client.hang
    ctx = make_ctx(work, client)
    started = Started()
    returned = await cancel_when_entered(
        client, lambda: call(ctx, "write_file", {"path": "a.txt", "content": "x"}, started)
    )
    assert (returned, client.abandoned, client.methods(), started.count, ctx.allowed_always) == (
        [],
        ["session/request_permission"],
        ["session/request_permission"],
        0,
        set(),
    )
    assert not (work / "a.txt").exists()


# ---------------------------------------------------------------------------------------------
# write_file.


@pytest.mark.anyio
async def test_write_file_creates_a_file_and_its_parents_locally(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": ALLOW_ONCE})
    outcome = await call(
        make_ctx(work, client), "write_file", {"path": "new/dir/f.txt", "content": "hi\n"}
    )
    path = work / "new/dir/f.txt"
    assert (outcome, path.read_text()) == (
        ToolOutcome(
            [
                TextContent(f"Created {path} (3 bytes)."),
                DiffContent(path=str(path), new_text="hi\n", old_text=None),
            ],
            False,
            {"path": str(path), "created": True, "bytes": 3},
            locations=[ToolCallLocation(str(path))],
            changes=[FileChange(str(path), None, b"hi\n")],
        ),
        "hi\n",
    )


@pytest.mark.anyio
async def test_write_file_overwrites_and_diffs_against_the_old_text(work: Path) -> None:
    (work / "a.txt").write_text("old\n")
    ctx = make_ctx(work, allowed={"write_file"})
    outcome = await call(ctx, "write_file", {"path": "a.txt", "content": "newer\n"})
    path = work / "a.txt"
    assert (outcome.content, path.read_text()) == (
        [
            TextContent(f"Wrote {path}: 6 bytes (was 4)."),
            DiffContent(path=str(path), new_text="newer\n", old_text="old\n"),
        ],
        "newer\n",
    )


@pytest.mark.anyio
async def test_write_file_starts_the_tool_once_after_permission(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": ALLOW_ONCE})
    started = Started()
    await call(make_ctx(work, client), "write_file", {"path": "a.txt", "content": "x"}, started)
    assert started.count == 1


@pytest.mark.anyio
async def test_write_file_uses_the_clients_fs_when_advertised(work: Path) -> None:
    client = FakeClient(
        read=True,
        write=True,
        answers={
            "session/request_permission": ALLOW_ONCE,
            "fs/read_text_file": {"content": "before"},
            "fs/write_text_file": None,
        },
    )
    outcome = await call(
        make_ctx(work, client), "write_file", {"path": "a.txt", "content": "after"}
    )
    path = str(work / "a.txt")
    assert (client.requests[1:], outcome.content, (work / "a.txt").exists()) == (
        [
            ("fs/read_text_file", {"sessionId": SESSION, "path": path}),
            ("fs/write_text_file", {"sessionId": SESSION, "path": path, "content": "after"}),
        ],
        [
            TextContent(f"Wrote {path}: 5 bytes (was 6)."),
            DiffContent(path=path, new_text="after", old_text="before"),
        ],
        False,
    )


@pytest.mark.anyio
async def test_write_file_via_client_treats_a_failed_read_as_a_new_file(work: Path) -> None:
    client = FakeClient(
        read=True,
        write=True,
        answers={
            "fs/read_text_file": ClientRequestError("fs/read_text_file", -32002, "not found"),
            "fs/write_text_file": None,
        },
    )
    outcome = await call(
        make_ctx(work, client, allowed={"write_file"}),
        "write_file",
        {"path": "a.txt", "content": "x"},
    )
    assert outcome.content[1] == DiffContent(path=str(work / "a.txt"), new_text="x", old_text=None)


@pytest.mark.anyio
async def test_write_file_via_client_write_error_is_an_error_outcome(work: Path) -> None:
    client = FakeClient(
        read=True,
        write=True,
        answers={
            "fs/read_text_file": {"content": ""},
            "fs/write_text_file": ClientRequestError(
                "fs/write_text_file", -32000, "read-only buffer"
            ),
        },
    )
    outcome = await call(
        make_ctx(work, client, allowed={"write_file"}),
        "write_file",
        {"path": "a.txt", "content": "x"},
    )
    assert outcome == error("fs/write_text_file: client error -32000: read-only buffer")


@pytest.mark.anyio
async def test_write_file_with_only_client_write_reads_the_old_text_locally(work: Path) -> None:
    (work / "a.txt").write_text("disk")
    client = FakeClient(write=True, answers={"fs/write_text_file": None})
    outcome = await call(
        make_ctx(work, client, allowed={"write_file"}),
        "write_file",
        {"path": "a.txt", "content": "x"},
    )
    assert (client.methods(), outcome.content[1], (work / "a.txt").read_text()) == (
        ["fs/write_text_file"],
        DiffContent(path=str(work / "a.txt"), new_text="x", old_text="disk"),
        "disk",
    )


@pytest.mark.anyio
async def test_write_file_with_only_client_read_writes_locally(work: Path) -> None:
    client = FakeClient(read=True, answers={"fs/read_text_file": {"content": "editor"}})
    outcome = await call(
        make_ctx(work, client, allowed={"write_file"}),
        "write_file",
        {"path": "a.txt", "content": "x"},
    )
    assert (client.methods(), outcome.content[1], (work / "a.txt").read_text()) == (
        ["fs/read_text_file"],
        DiffContent(path=str(work / "a.txt"), new_text="x", old_text="editor"),
        "x",
    )


@pytest.mark.anyio
async def test_write_file_refuses_a_path_outside_cwd_before_asking(
    work: Path, outside: Path
) -> None:
    client = FakeClient(answers={"session/request_permission": ALLOW_ONCE})
    started = Started()
    outcome = await call(
        make_ctx(work, client),
        "write_file",
        {"path": "../outside/new.txt", "content": "x"},
        started,
    )
    assert (outcome, client.requests, started.count, (outside / "new.txt").exists()) == (
        error(
            f"refused: ../outside/new.txt (resolved to {outside / 'new.txt'}) is outside the "
            f"session's directories (allowed: {work})"
        ),
        [],
        0,
        False,
    )


@pytest.mark.anyio
async def test_write_file_refuses_a_symlinked_directory_out_of_cwd(
    work: Path, outside: Path
) -> None:
    (work / "out").symlink_to(outside)
    outcome = await call(
        make_ctx(work, allowed={"write_file"}), "write_file", {"path": "out/x.txt", "content": "x"}
    )
    assert (outcome.is_error, (outside / "x.txt").exists()) == (True, False)


@pytest.mark.anyio
async def test_write_file_refuses_a_fifo_without_blocking(work: Path) -> None:
    os.mkfifo(work / "pipe")
    with anyio.fail_after(5):
        outcome = await call(
            make_ctx(work, allowed={"write_file"}), "write_file", {"path": "pipe", "content": "x"}
        )
    assert outcome == error("refused: pipe is a FIFO (named pipe), not a regular file")


@pytest.mark.anyio
async def test_write_file_refuses_to_replace_a_file_over_the_edit_limit(work: Path) -> None:
    (work / "big.txt").write_text("1234")
    ctx = make_ctx(work, allowed={"write_file"}, limits=ToolLimits(edit_bytes=3))
    outcome = await call(ctx, "write_file", {"path": "big.txt", "content": "x"})
    assert (outcome, (work / "big.txt").read_text()) == (
        error("refused: big.txt is 4 bytes, over the 3-byte limit for edits"),
        "1234",
    )


@pytest.mark.anyio
async def test_write_file_under_a_regular_file_is_an_error_outcome(work: Path) -> None:
    (work / "file").write_text("x")
    ctx = make_ctx(work, allowed={"write_file"})
    outcome = await call(ctx, "write_file", {"path": "file/child.txt", "content": "x"})
    assert outcome == error("cannot write file/child.txt: Not a directory")


@pytest.mark.anyio
async def test_write_file_allows_additional_directories(work: Path, outside: Path) -> None:
    ctx = make_ctx(work, extra=[outside], allowed={"write_file"})
    await call(ctx, "write_file", {"path": str(outside / "new.txt"), "content": "ok"})
    assert (outside / "new.txt").read_text() == "ok"


# ---------------------------------------------------------------------------------------------
# edit_file when the user changes the file while the permission question is up: the edit is
# made again on what the file holds then, and the diff shows that.


def editing(change: Callable[[], None]) -> Answer:
    """A permission answer that allows, after `change` ran (the user edited meanwhile)."""

    async def answer(method: str, params: Any) -> Any:
        change()
        return ALLOW_ONCE

    return answer


EDIT = {"path": "a.txt", "oldText": "two", "newText": "TWO"}


@pytest.mark.anyio
async def test_a_local_edit_keeps_a_line_the_user_added_while_asked(work: Path) -> None:
    path = work / "a.txt"
    path.write_text("one\ntwo\n")

    def add_line() -> None:
        with open(path, "a") as stream:
            stream.write("three\n")

    client = FakeClient(answers={"session/request_permission": editing(add_line)})
    outcome = await call(make_ctx(work, client), "edit_file", EDIT)
    assert (path.read_text(), outcome.content[1]) == (
        "one\nTWO\nthree\n",
        DiffContent(path=str(path), new_text="one\nTWO\nthree\n", old_text="one\ntwo\nthree\n"),
    )


@pytest.mark.anyio
async def test_a_local_edit_that_no_longer_applies_is_an_error_writing_nothing(
    work: Path,
) -> None:
    path = work / "a.txt"
    path.write_text("one\ntwo\n")
    client = FakeClient(
        answers={"session/request_permission": editing(lambda: path.write_text("one\n"))}
    )
    outcome = await call(make_ctx(work, client), "edit_file", EDIT)
    assert (outcome.is_error, path.read_text()) == (True, "one\n")
    assert texts([outcome]) == {
        f"{path} changed since it was read, and the edit no longer applies: oldText was not "
        f"found in {path}: it must match the file exactly, whitespace and line breaks included "
        "(read the file again to see its current text). Nothing was written."
    }


@pytest.mark.anyio
async def test_an_edit_through_the_client_is_made_on_what_it_reads_after_permission(
    work: Path,
) -> None:
    reads = iter([{"content": "one\ntwo\n"}, {"content": "one\ntwo\nthree\n"}])

    async def read(method: str, params: Any) -> Any:
        return next(reads)

    client = FakeClient(
        read=True,
        write=True,
        answers={
            "fs/read_text_file": read,
            "session/request_permission": ALLOW_ONCE,
            "fs/write_text_file": None,
        },
    )
    outcome = await call(make_ctx(work, client), "edit_file", EDIT)
    path = str(work / "a.txt")
    assert (client.requests[-1], outcome.content[1]) == (
        (
            "fs/write_text_file",
            {"sessionId": SESSION, "path": path, "content": "one\nTWO\nthree\n"},
        ),
        DiffContent(path=path, new_text="one\nTWO\nthree\n", old_text="one\ntwo\nthree\n"),
    )


@pytest.mark.anyio
async def test_an_edit_through_the_client_that_no_longer_applies_writes_nothing(
    work: Path,
) -> None:
    reads = iter([{"content": "one\ntwo\n"}, {"content": "one\n"}])

    async def read(method: str, params: Any) -> Any:
        return next(reads)

    client = FakeClient(
        read=True,
        write=True,
        answers={
            "fs/read_text_file": read,
            "session/request_permission": ALLOW_ONCE,
            "fs/write_text_file": None,
        },
    )
    outcome = await call(make_ctx(work, client), "edit_file", EDIT)
    assert (outcome.is_error, client.methods()) == (
        True,
        ["fs/read_text_file", "session/request_permission", "fs/read_text_file"],
    )


# ---------------------------------------------------------------------------------------------
# Races: a directory swapped for a symlink out while the tools resolve and open a path below it.
# Each runs with openat2(RESOLVE_BENEATH) and with the O_NOFOLLOW walk that stands in for it.

RACED_CALLS = 200


@pytest.fixture(params=["openat2", "walk"])
def strategy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(openat2, "usable", False)
    elif not openat2.usable:
        pytest.skip("this kernel has no openat2")
    return str(request.param)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class Swapper:
    """Swaps, in a thread and as fast as it can, what `cwd/x` is: a directory holding
    `secret.txt` ("inside the cwd", 15 bytes) or a symlink to `outside` (whose `secret.txt` is "secret"), until
    the `with` block ends. `renameat2(RENAME_EXCHANGE)` swaps both names in one step, so `x`
    always exists."""

    def __init__(self, cwd: Path, outside: Path) -> None:
        self.x, self.other = cwd / "x", cwd / "x.other"
        self.x.mkdir()
        (self.x / "secret.txt").write_text("inside the cwd\n")
        self.other.symlink_to(outside)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._swap, daemon=True)
        self.renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
        self.swaps = 0

    def _swap(self) -> None:
        x, other = os.fsencode(self.x), os.fsencode(self.other)
        while not self.stopping.is_set():
            if self.renameat2(_AT_FDCWD, x, _AT_FDCWD, other, _RENAME_EXCHANGE) != 0:
                raise OSError(ctypes.get_errno(), "renameat2")
            self.swaps += 1

    def __enter__(self) -> Swapper:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        self.thread.join()
        assert self.swaps > 0


def texts(outcomes: list[ToolOutcome]) -> set[str]:
    return {c.text for o in outcomes for c in o.content if isinstance(c, TextContent)}


@pytest.mark.anyio
async def test_a_read_racing_a_swap_to_a_symlink_out_never_reads_outside(
    strategy: str, work: Path, outside: Path
) -> None:
    ctx = make_ctx(work)
    with Swapper(work, outside):
        outcomes = [
            await call(ctx, "read_file", {"path": "x/secret.txt"}) for _ in range(RACED_CALLS)
        ]
    assert "secret\n" not in texts(outcomes)


@pytest.mark.anyio
async def test_a_write_racing_a_swap_to_a_symlink_out_never_writes_outside(
    strategy: str, work: Path, outside: Path
) -> None:
    ctx = make_ctx(work, allowed={"write_file"})
    with Swapper(work, outside):
        for index in range(RACED_CALLS):
            await call(ctx, "write_file", {"path": f"x/new{index}.txt", "content": "x"})
    assert os.listdir(outside) == ["secret.txt"]


@pytest.mark.anyio
async def test_an_edit_racing_a_swap_to_a_symlink_out_never_edits_outside(
    strategy: str, work: Path, outside: Path
) -> None:
    ctx = make_ctx(work, allowed={"edit_file"})
    edit = {"path": "x/secret.txt", "oldText": "e", "newText": "E", "replaceAll": True}
    with Swapper(work, outside):
        for _ in range(RACED_CALLS):
            await call(ctx, "edit_file", edit)
    assert (outside / "secret.txt").read_text() == "secret\n"


@pytest.mark.anyio
async def test_a_listing_racing_a_swap_to_a_symlink_out_never_lists_outside(
    strategy: str, work: Path, outside: Path
) -> None:
    ctx = make_ctx(work)
    with Swapper(work, outside):
        outcomes = [await call(ctx, "list_directory", {"path": "x"}) for _ in range(RACED_CALLS)]
    assert not any("[file] secret.txt (7 bytes)" in text for text in texts(outcomes))


@pytest.mark.anyio
async def test_a_grep_racing_a_swap_to_a_symlink_out_never_searches_outside(
    strategy: str, work: Path, outside: Path
) -> None:
    ctx = make_ctx(work)
    with Swapper(work, outside):
        outcomes = [await call(ctx, "grep", {"pattern": "secret"}) for _ in range(RACED_CALLS)]
    assert not any("secret" in text.replace("'secret'", "") for text in texts(outcomes))


# ---------------------------------------------------------------------------------------------
# run_command on the server itself.


def py(code: str, **extra: Any) -> dict[str, Any]:
    return {"command": PY, "args": ["-c", code], **extra}


def local_ctx(work: Path, **kwargs: Any) -> ToolContext:
    return make_ctx(work, allowed={"run_command"}, **kwargs)


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_returns_output_and_exit_status(work: Path) -> None:
    outcome = await call(local_ctx(work), "run_command", py("print('hi')"))
    assert outcome == ToolOutcome(
        [TextContent("hi\n[exit code 0]")],
        False,
        {"exitCode": 0, "signal": None, "truncated": False, "timedOut": False},
    )


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_non_zero_exit_is_an_error_outcome(work: Path) -> None:
    outcome = await call(local_ctx(work), "run_command", py("import sys; sys.exit(3)"))
    assert outcome == ToolOutcome(
        [TextContent("(no output)\n[exit code 3]")],
        True,
        {"exitCode": 3, "signal": None, "truncated": False, "timedOut": False},
    )


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_merges_stderr_into_the_output(work: Path) -> None:
    code = "import sys; print('out', flush=True); sys.stderr.write('err\\n')"
    outcome = await call(local_ctx(work), "run_command", py(code))
    assert outcome.content == [TextContent("out\nerr\n[exit code 0]")]


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_runs_in_the_session_cwd(work: Path) -> None:
    outcome = await call(local_ctx(work), "run_command", py("import os; print(os.getcwd())"))
    assert outcome.content == [TextContent(f"{work}\n[exit code 0]")]


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_does_not_use_a_shell(work: Path) -> None:
    args = ["-c", "import sys; print(sys.argv[1:])", "$HOME", "a b;c"]
    outcome = await call(local_ctx(work), "run_command", {"command": PY, "args": args})
    assert outcome.content == [TextContent("['$HOME', 'a b;c']\n[exit code 0]")]


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_kills_the_program_at_the_timeout(work: Path) -> None:
    # A program left to finish would exit 0 after its sleep; the outcome says it was killed.
    outcome = await call(
        local_ctx(work), "run_command", py("import time; time.sleep(5)", timeoutMs=200)
    )
    assert outcome == ToolOutcome(
        [TextContent("(no output)\n[timed out after 200 ms; the command was killed]")],
        True,
        {"exitCode": None, "signal": "SIGKILL", "truncated": False, "timedOut": True},
    )


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def _gone_soon(pid: int) -> bool:
    return poll(lambda: not _alive(pid), 3)


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_timeout_kills_grandchildren_too(work: Path) -> None:
    code = (
        "import os, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "open('grandchild.tmp', 'w').write(str(p.pid))\n"
        "os.rename('grandchild.tmp', 'grandchild.pid')\n"
        "time.sleep(30)\n"
    )
    # long enough for a loaded machine to start the grandchild before the timeout
    await call(local_ctx(work), "run_command", py(code, timeoutMs=5000))
    assert _gone_soon(int((work / "grandchild.pid").read_text())) is True


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_reports_a_signal(work: Path) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    outcome = await call(local_ctx(work), "run_command", py(code))
    assert outcome == ToolOutcome(
        [TextContent("(no output)\n[terminated by signal SIGTERM]")],
        True,
        {"exitCode": None, "signal": "SIGTERM", "truncated": False, "timedOut": False},
    )


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_program_not_found_is_an_error_outcome(work: Path) -> None:
    outcome = await call(local_ctx(work), "run_command", {"command": "no-such-program-acp-test"})
    assert outcome == error("command not found: no-such-program-acp-test")


@pytest.mark.process
@pytest.mark.anyio
async def test_run_command_keeps_the_tail_of_long_output(work: Path) -> None:
    ctx = local_ctx(work, limits=ToolLimits(output_bytes=10))
    outcome = await call(ctx, "run_command", py("print('a' * 20 + 'b' * 8)"))
    assert outcome == ToolOutcome(
        [
            TextContent(
                "[output truncated: showing the last 10 of 29 bytes]\nabbbbbbbb\n[exit code 0]"
            )
        ],
        False,
        {"exitCode": 0, "signal": None, "truncated": True, "timedOut": False},
    )


@pytest.mark.anyio
async def test_run_command_asks_permission_before_running(work: Path) -> None:
    client = FakeClient(answers={"session/request_permission": selected("reject_once")})
    code = "open('ran', 'w').close()"
    outcome = await call(make_ctx(work, client), "run_command", py(code))
    assert (outcome, (work / "ran").exists()) == (error("the user rejected this tool call"), False)


@pytest.mark.process
@pytest.mark.anyio
async def test_cancelling_a_local_command_kills_it(work: Path) -> None:
    code = (
        "import os, time\n"
        "open('child.tmp', 'w').write(str(os.getpid()))\n"
        "os.rename('child.tmp', 'child.pid')\n"
        "time.sleep(30)\n"
    )
    ctx = local_ctx(work)
    returned: list[ToolOutcome] = []

    async def go() -> None:
        returned.append(await call(ctx, "run_command", py(code)))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await wait_for((work / "child.pid").exists)
            tg.cancel_scope.cancel()
    assert (returned, _gone_soon(int((work / "child.pid").read_text()))) == ([], True)


# ---------------------------------------------------------------------------------------------
# run_command in a client terminal.

TERMINAL_ANSWERS: dict[str, Answer] = {
    "terminal/create": {"terminalId": "term-1"},
    "terminal/wait_for_exit": {"exitCode": 0, "signal": None},
    "terminal/output": {
        "output": "hi\n",
        "truncated": False,
        "exitStatus": {"exitCode": 0, "signal": None},
    },
    "terminal/kill": None,
    "terminal/release": None,
}
IDS = {"sessionId": SESSION, "terminalId": "term-1"}


def terminal_client(**overrides: Answer) -> FakeClient:
    answers = {**TERMINAL_ANSWERS, **{k.replace("__", "/"): v for k, v in overrides.items()}}
    return FakeClient(terminal=True, answers=answers)


@pytest.mark.anyio
async def test_run_command_uses_a_client_terminal_when_advertised(work: Path) -> None:
    client = terminal_client()
    started = Started()
    outcome = await call(
        make_ctx(work, client, allowed={"run_command"}),
        "run_command",
        {"command": "ls", "args": ["-l"]},
        started,
    )
    assert (client.requests, started.content, outcome) == (
        [
            (
                "terminal/create",
                {
                    "sessionId": SESSION,
                    "command": "ls",
                    "args": ["-l"],
                    "cwd": str(work),
                    "outputByteLimit": 65536,
                },
            ),
            ("terminal/wait_for_exit", IDS),
            ("terminal/output", IDS),
            ("terminal/release", IDS),
        ],
        [[ToolTerminal("term-1")]],
        ToolOutcome(
            [TextContent("hi\n[exit code 0]")],
            False,
            {"exitCode": 0, "signal": None, "truncated": False, "timedOut": False},
        ),
    )


@pytest.mark.anyio
async def test_terminal_non_zero_exit_is_an_error_outcome(work: Path) -> None:
    client = terminal_client(
        terminal__output={"output": "", "truncated": False, "exitStatus": {"exitCode": 2}}
    )
    outcome = await call(
        make_ctx(work, client, allowed={"run_command"}), "run_command", {"command": "false"}
    )
    assert (outcome.is_error, outcome.content) == (
        True,
        [TextContent("(no output)\n[exit code 2]")],
    )


@pytest.mark.anyio
async def test_terminal_exit_status_falls_back_to_wait_for_exit(work: Path) -> None:
    client = terminal_client(
        terminal__wait_for_exit={"exitCode": None, "signal": "SIGSEGV"},
        terminal__output={"output": "boom", "truncated": False},
    )
    outcome = await call(
        make_ctx(work, client, allowed={"run_command"}), "run_command", {"command": "crash"}
    )
    assert outcome.content == [TextContent("boom\n[terminated by signal SIGSEGV]")]


@pytest.mark.anyio
async def test_terminal_timeout_kills_then_reads_output_and_releases(work: Path) -> None:
    client = terminal_client(
        terminal__output={
            "output": "partial",
            "truncated": False,
            "exitStatus": {"signal": "SIGKILL"},
        }
    )
    client.answers["terminal/wait_for_exit"] = client.hang
    ctx = make_ctx(work, client, allowed={"run_command"})
    outcome = await call(ctx, "run_command", {"command": "sleep", "args": ["9"], "timeoutMs": 50})
    assert (client.methods()[1:], client.abandoned, outcome) == (
        ["terminal/wait_for_exit", "terminal/kill", "terminal/output", "terminal/release"],
        ["terminal/wait_for_exit"],
        ToolOutcome(
            [TextContent("partial\n[timed out after 50 ms; the command was killed]")],
            True,
            {"exitCode": None, "signal": "SIGKILL", "truncated": False, "timedOut": True},
        ),
    )


@pytest.mark.anyio
async def test_terminal_truncated_output_is_noted(work: Path) -> None:
    client = terminal_client(
        terminal__output={"output": "tail", "truncated": True, "exitStatus": {"exitCode": 0}}
    )
    outcome = await call(
        make_ctx(work, client, allowed={"run_command"}), "run_command", {"command": "yes"}
    )
    assert outcome.content == [
        TextContent("[output truncated by the client to its last 65536 bytes]\ntail\n[exit code 0]")
    ]


@pytest.mark.anyio
async def test_terminal_is_released_when_output_fails(work: Path) -> None:
    client = terminal_client(terminal__output=ClientRequestError("terminal/output", -32000, "gone"))
    outcome = await call(
        make_ctx(work, client, allowed={"run_command"}), "run_command", {"command": "ls"}
    )
    assert (client.methods()[-1], outcome) == (
        "terminal/release",
        error("terminal/output: client error -32000: gone"),
    )


@pytest.mark.anyio
async def test_terminal_release_error_does_not_hide_the_result(work: Path) -> None:
    client = terminal_client(
        terminal__release=ClientRequestError("terminal/release", -32000, "unknown terminal")
    )
    outcome = await call(
        make_ctx(work, client, allowed={"run_command"}), "run_command", {"command": "ls"}
    )
    assert outcome.content == [TextContent("hi\n[exit code 0]")]


@pytest.mark.anyio
async def test_terminal_create_error_is_an_error_outcome_without_release(work: Path) -> None:
    client = terminal_client(
        terminal__create=ClientRequestError("terminal/create", -32000, "no shell")
    )
    outcome = await call(
        make_ctx(work, client, allowed={"run_command"}), "run_command", {"command": "ls"}
    )
    assert (client.methods(), outcome) == (
        ["terminal/create"],
        error("terminal/create: client error -32000: no shell"),
    )


@pytest.mark.anyio
async def test_terminal_malformed_create_result_is_an_error_outcome(work: Path) -> None:
    client = terminal_client(terminal__create={"id": "t"})
    outcome = await call(
        make_ctx(work, client, allowed={"run_command"}), "run_command", {"command": "ls"}
    )
    assert outcome == error(
        "the client sent a malformed terminal/create result: "
        "Object missing required field `terminalId`"
    )


@pytest.mark.anyio
async def test_terminal_is_released_when_the_turn_is_cancelled_during_wait(work: Path) -> None:
    client = terminal_client()
    client.answers["terminal/wait_for_exit"] = client.hang
    ctx = make_ctx(work, client, allowed={"run_command"})
    returned = await cancel_when_entered(
        client, lambda: call(ctx, "run_command", {"command": "sleep"})
    )
    assert (returned, client.methods(), client.abandoned) == (
        [],
        ["terminal/create", "terminal/wait_for_exit", "terminal/release"],
        ["terminal/wait_for_exit"],
    )


@pytest.mark.anyio
async def test_terminal_release_that_never_answers_is_abandoned(work: Path) -> None:
    client = terminal_client()
    client.answers["terminal/release"] = client.hang
    ctx = make_ctx(work, client, allowed={"run_command"}, limits=ToolLimits(cleanup_timeout_s=0.05))
    with anyio.fail_after(5):
        outcome = await call(ctx, "run_command", {"command": "ls"})
    assert (outcome.is_error, client.abandoned) == (False, ["terminal/release"])


# ---------------------------------------------------------------------------------------------
# todo_write.


@pytest.mark.anyio
async def test_todo_write_returns_the_plan_with_default_priority(work: Path) -> None:
    todos = [
        {"content": "read the code", "status": "completed"},
        {"content": "fix the bug", "status": "in_progress", "priority": "high"},
        {"content": "write tests", "status": "pending", "priority": "low"},
    ]
    outcome = await call(make_ctx(work), "todo_write", {"todos": todos})
    assert outcome == ToolOutcome(
        [
            TextContent(
                "Plan updated (3 items):\n"
                "[x] read the code\n"
                "[~] fix the bug (high priority)\n"
                "[ ] write tests (low priority)"
            )
        ],
        False,
        UNSET,
        [
            PlanEntry("read the code", "medium", "completed"),
            PlanEntry("fix the bug", "high", "in_progress"),
            PlanEntry("write tests", "low", "pending"),
        ],
    )


@pytest.mark.anyio
async def test_todo_write_with_no_items_clears_the_plan(work: Path) -> None:
    outcome = await call(make_ctx(work), "todo_write", {"todos": []})
    assert outcome == ToolOutcome([TextContent("Plan cleared.")], False, UNSET, [])


@pytest.mark.anyio
async def test_todo_write_starts_the_tool_once(work: Path) -> None:
    started = Started()
    await call(make_ctx(work), "todo_write", {"todos": []}, started)
    assert started.count == 1


@pytest.mark.anyio
async def test_todo_write_names_an_invalid_status(work: Path) -> None:
    todos = [{"content": "x", "status": "done"}]
    outcome = await call(make_ctx(work), "todo_write", {"todos": todos})
    assert outcome == error(
        "invalid arguments for todo_write: Invalid enum value 'done' - at `$.todos[0].status`"
    )


@pytest.mark.anyio
async def test_todo_write_asks_no_permission(work: Path) -> None:
    client = FakeClient()
    await call(make_ctx(work, client), "todo_write", {"todos": []})
    assert client.requests == []
