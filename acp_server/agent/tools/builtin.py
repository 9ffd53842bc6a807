"""The built-in tools (SPEC 4.3), registered with their descriptions, kinds and titles.

`task` is registered like the others; its subagent is run by the loop, which lends its
runner to the calls of its turn (`ToolContext.subagents`). Where the loop cannot (inside a
subagent), a `task` call gets an error result.
"""

from __future__ import annotations

import os.path
from functools import partial
from typing import Any, Final

import anyio.from_thread

from ...core.acp_updates import ToolCallLocation
from . import edit, listing, search
from .arguments import (
    ReadFileArgs,
    RunCommandArgs,
    TaskArgs,
    TodoWriteArgs,
    WriteFileArgs,
    parameters_schema,
)
from .base import ToolCallInfo, ToolContext, ToolOutcome, error_outcome
from .coding import edit_file, tree_runner
from .commands import run_command
from .files import read_file, write_file
from .history import SearchHistoryArgs, run_search_history
from .plan import todo_write
from .registry import OnStarted, Tool, ToolRegistry


def _get(args: Any, key: str) -> Any:
    return args.get(key) if isinstance(args, dict) else None


def _path_title(verb: str) -> Any:
    def title(args: Any) -> str | None:
        path = _get(args, "path")
        return f"{verb} {path}" if isinstance(path, str) else None

    return title


def _path_location(args: Any) -> list[ToolCallLocation] | None:
    """The file named by an absolute `path` argument, folded lexically. A relative one is
    left to the result's locations: ACP locations are absolute, and the cwd is not known
    here."""
    path = _get(args, "path")
    if not isinstance(path, str) or not os.path.isabs(path):
        return None
    line = _get(args, "line")
    folded = os.path.normpath(path)
    if isinstance(line, int) and not isinstance(line, bool) and line >= 1:
        return [ToolCallLocation(folded, line)]
    return [ToolCallLocation(folded)]


def _search_title(verb: str) -> Any:
    def title(args: Any) -> str | None:
        pattern = _get(args, "pattern")
        if not isinstance(pattern, str):
            return None
        path = _get(args, "path")
        return f"{verb} {pattern} in {path}" if isinstance(path, str) else f"{verb} {pattern}"

    return title


def _command_title(args: Any) -> str | None:
    command = _get(args, "command")
    if not isinstance(command, str):
        return None
    extra = _get(args, "args")
    words = [command, *(extra if isinstance(extra, list) else [])]
    return "Run " + " ".join(str(w) for w in words)


def _task_title(args: Any) -> str | None:
    prompt = _get(args, "prompt")
    return f"Subagent: {prompt}" if isinstance(prompt, str) else None


def _history_title(args: Any) -> str | None:
    pattern = _get(args, "pattern")
    return f"Search history: {pattern}" if isinstance(pattern, str) else None


async def _run_task(
    ctx: ToolContext, call: ToolCallInfo, arguments: str, on_started: OnStarted
) -> ToolOutcome:
    if ctx.subagents is None:
        return error_outcome("the task tool is not available in this session")
    # The raw arguments: the subagent runner decodes them itself, so that a call where no
    # subagent can run says so whatever its arguments.
    return await ctx.subagents(call.call_id, arguments, on_started)


def _raw(arguments: str) -> str:
    return arguments


BUILTIN_TOOLS: Final = ToolRegistry(
    [
        Tool.typed(
            "read_file",
            (
                "Read a text file and return its content. `path` is absolute or relative to the "
                "working directory; `line` (1-based) and `limit` select a range of lines. Output "
                "over 1 MiB is cut, with a note saying so; bytes that are not UTF-8 are shown as "
                "U+FFFD."
            ),
            ReadFileArgs,
            "read",
            read_file,
            title=_path_title("Read"),
            locations=_path_location,
        ),
        Tool.typed(
            "write_file",
            (
                "Create or overwrite a text file with `content`, which becomes the whole file. "
                "Missing parent directories are created. The user is asked for permission first; "
                "the result shows the change as a diff."
            ),
            WriteFileArgs,
            "edit",
            write_file,
            title=_path_title("Write"),
            locations=_path_location,
        ),
        Tool.typed(
            "run_command",
            (
                "Run a program in the working directory and return its combined stdout and stderr "
                "(the last 64 KiB) and its exit status. There is no shell: `command` is the "
                "program and `args` its arguments; for pipes or redirections, run `sh` with args "
                '["-c", "..."]. The program is killed after `timeoutMs` (default 120000). The '
                "user is asked for permission first. A non-zero exit status or a timeout makes "
                "the call fail."
            ),
            RunCommandArgs,
            "execute",
            run_command,
            title=_command_title,
        ),
        Tool.typed(
            "todo_write",
            (
                "Replace the plan shown to the user with this todo list. Send the whole list "
                "every time, with each item's status (pending, in_progress, completed) and "
                "optional priority (high, medium, low; default medium). Use it for work with "
                "several steps."
            ),
            TodoWriteArgs,
            "think",
            todo_write,
            title=lambda args: "Update the plan",
        ),
        Tool(
            "task",
            (
                "Hand a self-contained job to a subagent, which works in a fresh context with the "
                "same tools and returns its final answer as this call's result. Give it "
                "everything it needs in `prompt`; it cannot see this conversation."
            ),
            parameters_schema(TaskArgs),
            "other",
            _run_task,
            _raw,
            title=_task_title,
        ),
        Tool.typed(
            "edit_file",
            edit.DESCRIPTION,
            edit.EditFileArgs,
            edit.KIND,
            edit_file,
            title=_path_title("Edit"),
            locations=_path_location,
        ),
        Tool.typed(
            "list_directory",
            listing.DESCRIPTION,
            listing.ListDirectoryArgs,
            listing.KIND,
            tree_runner(listing.list_directory),
            title=_path_title("List"),
        ),
        Tool.typed(
            "glob",
            search.GLOB_DESCRIPTION,
            search.GlobArgs,
            search.GLOB_KIND,
            tree_runner(search.glob),
            title=_search_title("Find"),
        ),
        Tool.typed(
            "grep",
            search.GREP_DESCRIPTION,
            search.GrepArgs,
            search.GREP_KIND,
            # In its worker thread, a cancelled call stops at its next file or piece of one.
            tree_runner(partial(search.grep, checkpoint=anyio.from_thread.check_cancelled)),
            title=_search_title("Search"),
        ),
        Tool.typed(
            "search_history",
            (
                "Search this session's own earlier messages and tool results with a regular "
                "expression, newest first, for details a summary of the conversation left out. "
                "Each matching line comes with its seq, turn and source."
            ),
            SearchHistoryArgs,
            "search",
            run_search_history,
            title=_history_title,
        ),
    ]
)
"""Every session's built-in tools, in the order the model is offered them."""
