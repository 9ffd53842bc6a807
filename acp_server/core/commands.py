"""Slash commands (SPEC 4.4): which there are, and how a prompt names one, without I/O.

A prompt whose text starts with `/<name>` of a listed command runs that command instead of
calling the model; any other `/word` is text for the model. `session_stats` is what `/stats`
answers: figures read from the log alone (its tokens count an automatic title's model call
too; its model calls are the turns' steps); `help_text` what `/help` answers: one line for
each command listed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final, cast

import msgspec

from .acp_updates import AvailableCommand, CommandInput
from .chunk_rows import ROW_CLASSES, StorageRecord
from .content import ContentBlock, TextContent
from .events import (
    AssistantMessageEvent,
    SessionEvent,
    SessionTitle,
    StepStart,
    ToolCall,
    TurnStart,
    UserMessageEvent,
    event_type,
)
from .paging import record_count

COMMANDS: Final[tuple[AvailableCommand, ...]] = (
    AvailableCommand("mode", "Switch the session's mode", CommandInput("mode id")),
    AvailableCommand("model", "Switch the session's model", CommandInput("model id")),
    AvailableCommand("title", "Set the session's title", CommandInput("title")),
    AvailableCommand("stats", "Show the session log's figures"),
    AvailableCommand(
        "compact",
        "Summarise the conversation so far to free the model's context",
        CommandInput("instructions for the summary (optional)"),
    ),
    AvailableCommand(
        "init",
        "Ask the model to write a starting AGENTS.md for the project",
        CommandInput("what to focus on (optional)"),
    ),
    AvailableCommand(
        "rewind",
        "Restore the files as they were before a message and leave the later turns out of "
        "the conversation (no number: list the messages)",
        CommandInput("message number (optional)"),
    ),
    AvailableCommand("mcp", "Show the session's MCP servers, their state and their tools"),
    AvailableCommand("help", "List the commands"),
)
COMMAND_NAMES: Final = frozenset(command.name for command in COMMANDS)


def init_request(focus: str) -> str:
    """What `/init` asks the model: to write a starting `AGENTS.md` for the project (with the
    write tool, so that the session's mode and permissions apply), with the user's `focus`."""
    request = (
        "Write a starting AGENTS.md for this project, in the working directory: the "
        "instructions a coding agent needs to work here. First look at the project (its "
        "layout, README, build and test configuration, and any AGENTS.md, CLAUDE.md, "
        ".cursorrules or CONTRIBUTING file). Then write, briefly and concretely: what the "
        "project is, how it is laid out, the commands that build, test and lint it (a single "
        "test too), the code style and conventions that are not obvious from the code, and "
        "anything an agent must not do. Leave out what any developer knows and what the "
        "files say plainly. If an AGENTS.md exists already, improve it with edit_file "
        "rather than replacing it; otherwise create it with write_file."
    )
    if focus:
        request += f"\n\nThe user adds: {focus}"
    return request


class CommandCall(msgspec.Struct, frozen=True):
    name: str
    argument: str
    """The text after the name, stripped (empty when none was given)."""


def parse_command(
    prompt: Sequence[ContentBlock], names: Iterable[str] = COMMAND_NAMES
) -> CommandCall | None:
    """The command a prompt runs, or None when it is a prompt for the model.

    Only a prompt whose first block is text starting with `/<name>` (followed by the end or
    whitespace) of a listed command runs it; the argument is the rest of that text.
    """
    if not prompt or type(prompt[0]) is not TextContent:
        return None
    text = prompt[0].text.lstrip()
    if not text.startswith("/"):
        return None
    head, _, rest = text[1:].partition(" ")
    name, newline, more = head.partition("\n")
    if newline:
        rest = more + (" " + rest if rest else "")
    if name not in set(names):
        return None
    return CommandCall(name, rest.strip())


def help_text(commands: Iterable[AvailableCommand] = COMMANDS) -> str:
    """`/help`: one line per command, `/<name> <hint>: <description>`, in the listed order,
    then how any other `/word` is taken."""
    lines = ["Commands:"]
    for command in commands:
        usage = f"/{command.name}"
        if isinstance(command.input, CommandInput):
            usage += f" <{command.input.hint}>"
        lines.append(f"{usage}: {command.description}")
    lines.append("Any other /word is sent to the model as text.")
    return "\n".join(lines)


def session_stats(records: Iterable[StorageRecord]) -> str:
    """`/stats`: the log's figures as a few lines of text, from its records (chunk rows count
    as the chunks they hold)."""
    kinds: Counter[str] = Counter()
    turns = model_calls = tool_calls = messages = 0
    input_tokens = output_tokens = 0
    count = 0
    for record in records:
        if type(record) in ROW_CLASSES:
            chunks = record_count(record)
            count += chunks
            kinds["assistant/chunk"] += chunks
            continue
        event = cast(SessionEvent, record)
        count += 1
        kinds[event_type(event)] += 1
        kind = type(event)
        if kind is TurnStart:
            turns += 1
        elif kind is StepStart:
            model_calls += 1
        elif kind is ToolCall:
            tool_calls += 1
        elif kind is UserMessageEvent:
            messages += 1
        elif type(event) is AssistantMessageEvent:
            messages += 1
            usage = event.data.usage
            if usage:
                input_tokens += usage.input_tokens
                output_tokens += usage.output_tokens
        elif type(event) is SessionTitle:
            # An automatic title's model call is no step, but its tokens were spent all the same.
            title_usage = event.data.usage
            if title_usage:
                input_tokens += title_usage.input_tokens
                output_tokens += title_usage.output_tokens
    lines = [
        f"Events: {count}",
        f"Turns: {turns}",
        f"Messages: {messages}",
        f"Model calls: {model_calls}",
        f"Tool calls: {tool_calls}",
        f"Tokens: {input_tokens} in, {output_tokens} out",
        "By type: " + ", ".join(f"{name} {n}" for name, n in sorted(kinds.items())),
    ]
    return "\n".join(lines)
