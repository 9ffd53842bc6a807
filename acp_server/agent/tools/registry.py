"""The tools of a session, each registered once with everything said about it (SPEC 4.3).

A `Tool` is a name, a description and a JSON Schema (what the model is told), an ACP kind and
a title (what the client is shown), how its arguments are decoded, and the runner that does
the work. A `ToolRegistry` holds a session's tools in the order the model sees them: the
built-in ones (`builtin.BUILTIN_TOOLS`) and those of the session's MCP servers. Nothing else
switches on tool names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from ...core.acp_updates import (
    ToolCallContent,
    ToolCallLocation,
    ToolKind,
    ToolPresentation,
    clip_title,
    unknown_tool_presentation,
)
from ...core.messages import ToolDefinition
from .arguments import Arguments, parameters_schema
from .base import ToolCallInfo, ToolContext, ToolOutcome


class OnStarted(Protocol):
    """Says that a call's real work starts (its `in_progress` update), with what the call
    shows while it runs, if anything (the terminal a command runs in)."""

    def __call__(self, content: list[ToolCallContent] | None = None) -> Awaitable[None]: ...


Runner = Callable[[ToolContext, ToolCallInfo, Any, OnStarted], Awaitable[ToolOutcome]]
"""Runs one call with its decoded arguments; awaits `on_started` right before the real work."""

Decoder = Callable[[str], Any]
"""The model's raw arguments as the runner takes them; raises `msgspec.DecodeError`."""


def _no_title(args: Any) -> str | None:
    return None


def _no_locations(args: Any) -> list[ToolCallLocation] | None:
    return None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    """The JSON Schema of the arguments."""
    kind: ToolKind
    run: Runner
    decode: Decoder
    title: Callable[[Any], str | None] = _no_title
    """The call's title from its parsed arguments; None (e.g. they do not fit): the name."""
    locations: Callable[[Any], list[ToolCallLocation] | None] = _no_locations

    @classmethod
    def typed(
        cls,
        name: str,
        description: str,
        arguments: type[Arguments],
        kind: ToolKind,
        run: Runner,
        **presentation: Any,
    ) -> Tool:
        """A tool whose arguments are a msgspec struct: its schema is generated from the struct
        that decodes them, so what the model is told and what is accepted cannot drift."""

        def decode(raw: str) -> Any:
            return msgspec.json.decode(raw, type=arguments)

        return cls(
            name, description, parameters_schema(arguments), kind, run, decode, **presentation
        )

    def definition(self) -> ToolDefinition:
        return ToolDefinition(self.name, self.description, self.parameters)

    def present(self, args: Any) -> ToolPresentation:
        title = self.title(args)
        locations = self.locations(args)
        return ToolPresentation(
            clip_title(title if title is not None else self.name),
            self.kind,
            locations if locations is not None else msgspec.UNSET,
        )


class ToolRegistry:
    """A session's tools by name, in the order they were registered."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"tool {tool.name!r} registered twice")
            self._tools[tool.name] = tool
        self.definitions: list[ToolDefinition] = [t.definition() for t in self._tools.values()]
        """What the model is offered, every model request."""

    def extended(self, tools: Iterable[Tool]) -> ToolRegistry:
        """These tools and `tools` after them."""
        return ToolRegistry([*self._tools.values(), *tools])

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def present(self, name: str, args: Any) -> ToolPresentation:
        """The `ToolPresenter` of this session: how a call of `name` is shown."""
        tool = self._tools.get(name)
        if tool is None:
            return unknown_tool_presentation(name, args)
        return tool.present(args)
