"""The tools of a session's MCP servers (SPEC 4.5), through the official MCP SDK.

`McpServers` holds the connections of one live session. `run` (a task of the registry's
services) reports started at once and connects every server in the background: the session
answers without waiting for them. The servers are `settled` when each has connected or failed,
or when the connect timeout has passed, whichever is first; then `on_settled` is told which
failed (once) and `tools` holds the tools of those that connected. A turn waits for `settled`
before its first model call (`wait_settled`), so a slow server holds a prompt up for the
connect timeout at most and a server still connecting has its tools offered once it is there.
The connections are kept until `aclose`, which closes them all (a stdio server's process is
stopped and reaped by the SDK). `statuses` says where each server is, for `/mcp`.

Each tool of a connected server becomes a registry `Tool` named `mcp__<server>__<tool>`. A
call asks permission like any tool that acts outside the server, then calls the MCP tool with
a timeout; every way it can fail (an `isError` result, an MCP error, a server that died, the
timeout) is an error outcome the model reads. Cancelling the turn cancels the call.

A server's own questions to the user (MCP elicitation) during a call go to the client as a form
of that call (`elicitation`), only to a client that advertised form elicitation; any other
client's server is answered `decline` and the client is never asked.

A result is capped as the built-in tools' are (`ToolLimits.mcp_result_bytes`, `cap_result`)
before it reaches the log, the wire and later model requests, with a note on what was left out.

Secrets (a stdio server's `env` values, HTTP header values, credentials in a URL) go to the
server and nowhere else: failure reasons are redacted before they are logged or shown.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec
from anyio.abc import TaskStatus
from msgspec import UNSET

from ...core.content import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceContents,
    ResourceLink,
    TextContent,
    ToolResultContent,
)
from ...core.mcp_status import McpServerStatus
from ..mcp_config import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, McpServerConfig
from ..ports import ClientRequestError
from .base import ToolCallInfo, ToolContext, ToolError, ToolOutcome, error_outcome
from .elicitation import FormRefused, elicit, form_from_mcp
from .excerpts import complete_utf8_prefix
from .permission import ensure_permission
from .registry import OnStarted, Tool

if TYPE_CHECKING:
    from mcp import types
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.exceptions import MCPError


def _load_sdk() -> None:
    """Import the MCP SDK into this module's names. It takes a second or more, so a session's
    servers import it in a worker thread when they start connecting (`McpServers.run`):
    neither the answer that made the session live nor the event loop waits for it."""
    global types, ClientSession, sse_client, StdioServerParameters, stdio_client
    global streamable_http_client, create_mcp_http_client, MCPError
    from mcp import types
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.exceptions import MCPError


log = logging.getLogger(__name__)

NAME_LIMIT: Final = 64
"""The longest tool name model APIs accept."""

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """`mcp__<server>__<tool>`, characters outside `[A-Za-z0-9_-]` as `_`, at most 64
    characters, and not in `taken` (a clash gets `_2`, `_3`, ... at its end)."""
    base = _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:NAME_LIMIT]
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: NAME_LIMIT - len(suffix)] + suffix
    return name


def redact(config: McpServerConfig, text: str) -> str:
    """`text` (an error message) without any secret of `config`."""
    if config.url:
        text = text.replace(config.url, config.address)
    secrets = {*config.env.values(), *config.headers.values()}
    for value in list(secrets):
        secrets.update(word for word in value.split() if len(word) >= 8)
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "<redacted>")
    return text


def _reason(exc: BaseException) -> str:
    """What went wrong, from the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(eq=False)
class _Running:
    """A tool call of a server, running now: where the server's elicitations go meanwhile."""

    ctx: ToolContext
    call: ToolCallInfo
    asking: set[anyio.CancelScope] = field(default_factory=set)
    """The elicitations sent to the client for it, unanswered: cancelled when the call ends."""


@dataclass(eq=False)
class _Server:
    config: McpServerConfig
    session: ClientSession | None = None
    tools: list[types.Tool] = field(default_factory=list)
    failure: str | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    running: _Running | None = None
    """The call running now, if any (a session's tool calls run one at a time)."""
    ended: str | None = None
    """Why a connection that was made has ended since."""

    def status(self) -> McpServerStatus:
        name, transport = self.config.name, self.config.transport
        if self.failure is not None:
            return McpServerStatus(name, transport, "failed", reason=self.failure)
        if not self.ready.is_set():
            return McpServerStatus(name, transport, "connecting")
        if self.session is None:
            return McpServerStatus(name, transport, "disconnected", reason=self.ended)
        return McpServerStatus(name, transport, "connected", tuple(t.name for t in self.tools))


SettledListener = Callable[[list[tuple[str, str]]], None]
"""Told, once the servers have settled, (name, why) for each that could not be connected."""


class McpServers:
    """The MCP servers of one live session and their tools."""

    def __init__(
        self,
        configs: Sequence[McpServerConfig],
        *,
        cwd: str,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        on_settled: SettledListener | None = None,
    ) -> None:
        self.configs = list(configs)
        self.cwd = cwd
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self._servers = [_Server(config) for config in self.configs]
        self.tools: list[Tool] = []
        """The tools of every server that connected, in the order of the servers (empty
        until they have settled)."""
        self.on_settled = on_settled
        self.settled = anyio.Event()
        """Set once every server has connected or failed, or the connect timeout has passed
        (or the servers were closed first)."""
        self._closing = anyio.Event()
        self._closed = anyio.Event()

    @property
    def failures(self) -> list[tuple[str, str]]:
        """(server name, why) for each server that could not be connected."""
        return [(s.config.name, s.failure) for s in self._servers if s.failure is not None]

    def statuses(self) -> list[McpServerStatus]:
        """Where each server is now, in the client's order (`/mcp`)."""
        return [server.status() for server in self._servers]

    async def wait_settled(self) -> None:
        """Return once the servers have settled: at once when they have, else within the
        connect timeout of their start."""
        await self.settled.wait()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Say so at once (`task_status.started()`), connect the servers in the background,
        keep them until `aclose`."""
        try:
            async with anyio.create_task_group() as servers:
                servers.start_soon(self._connect_all)
                servers.start_soon(self._settle)
                task_status.started()
                await self._closing.wait()
                servers.cancel_scope.cancel()
        finally:
            self.settled.set()  # closed before they settled: nothing waits for them any more
            self._closed.set()

    async def _connect_all(self) -> None:
        """Import the SDK (off the event loop, once per process), then connect every server."""
        await anyio.to_thread.run_sync(_load_sdk)
        async with anyio.create_task_group() as servers:
            for server in self._servers:
                servers.start_soon(self._serve, server)

    async def _settle(self) -> None:
        """Wait for every server (up to the connect timeout), give up on the late ones, then
        register the tools and tell `on_settled` which failed."""
        with anyio.move_on_after(self.connect_timeout):
            for server in self._servers:
                await server.ready.wait()
        for server in self._servers:
            if not server.ready.is_set():
                server.failure = f"it did not connect within {self.connect_timeout:g} s"
                log.warning("MCP server %r: %s", server.config.name, server.failure)
                server.scope.cancel()
        self.tools = self._registered()
        if self.on_settled is not None:
            try:
                self.on_settled(self.failures)
            except Exception:  # a listener's bug must not end the connections
                log.exception("reporting the MCP servers that failed")
        self.settled.set()

    async def aclose(self) -> None:
        """Close every connection; returns once they are closed (stdio processes reaped)."""
        self._closing.set()
        await self._closed.wait()

    async def _serve(self, server: _Server) -> None:
        config = server.config
        with server.scope:
            try:
                async with AsyncExitStack() as stack:
                    read, write = await self._open(config, stack)
                    session = await stack.enter_async_context(
                        ClientSession(read, write, elicitation_callback=partial(_elicit, server))
                    )
                    await session.initialize()
                    server.tools = await _list_tools(session)
                    server.session = session
                    server.ready.set()
                    await anyio.sleep_forever()
            except Exception as exc:
                reason = redact(config, _reason(exc))
                if server.ready.is_set():
                    server.ended = reason
                    log.warning("MCP server %r: the connection ended: %s", config.name, reason)
                else:
                    server.failure = reason
                    log.warning("MCP server %r could not be connected: %s", config.name, reason)
            finally:
                server.session = None
                server.ready.set()

    async def _open(self, config: McpServerConfig, stack: AsyncExitStack) -> tuple[Any, Any]:
        """The transport's read and write streams, closed with `stack`."""
        if config.transport == "stdio":
            parameters = StdioServerParameters(
                command=config.command, args=list(config.args), env=config.env, cwd=self.cwd
            )
            return await stack.enter_async_context(stdio_client(parameters, errlog=sys.stderr))
        if config.transport == "sse":
            return await stack.enter_async_context(sse_client(config.url, headers=config.headers))
        client = await stack.enter_async_context(create_mcp_http_client(headers=config.headers))
        return await stack.enter_async_context(
            streamable_http_client(config.url, http_client=client)
        )

    def _registered(self) -> list[Tool]:
        from .builtin import BUILTIN_TOOLS  # the names the MCP tools must not take

        taken = set(BUILTIN_TOOLS.names)
        tools: list[Tool] = []
        for server in self._servers:
            if server.session is None:
                continue
            for mcp_tool in server.tools:
                name = tool_name(server.config.name, mcp_tool.name, taken)
                taken.add(name)
                tools.append(self._tool(server, mcp_tool, name))
        return tools

    def _tool(self, server: _Server, mcp_tool: types.Tool, name: str) -> Tool:
        shown = mcp_tool.title or (mcp_tool.annotations and mcp_tool.annotations.title)
        title = f"{server.config.name}: {shown or mcp_tool.name}"

        async def run(
            ctx: ToolContext, call: ToolCallInfo, args: dict[str, Any], on_started: OnStarted
        ) -> ToolOutcome:
            return await self._call(server, mcp_tool.name, ctx, call, args, on_started)

        return Tool(
            name,
            mcp_tool.description or shown or mcp_tool.name,
            mcp_tool.input_schema,
            "other",
            run,
            _object_arguments,
            title=lambda args: title,
        )

    async def _call(
        self,
        server: _Server,
        tool: str,
        ctx: ToolContext,
        call: ToolCallInfo,
        args: dict[str, Any],
        on_started: OnStarted,
    ) -> ToolOutcome:
        name = server.config.name
        if server.session is None:
            return error_outcome(f"the MCP server {name!r} is not connected")
        await ensure_permission(ctx, call)
        session = server.session
        if session is None:  # it went away while the user was asked
            return error_outcome(f"the MCP server {name!r} is not connected")
        await on_started()
        server.running = running = _Running(ctx, call)
        try:
            with anyio.fail_after(self.call_timeout):
                result = await session.call_tool(tool, args)
        except TimeoutError:
            return error_outcome(
                f"the MCP server {name!r} did not answer within {self.call_timeout:g} s"
            )
        except Exception as exc:  # a dead server, a broken pipe, an MCP error
            reason = redact(server.config, _reason(exc))
            log.info("MCP tool %s of server %r failed: %s", tool, name, reason)
            return error_outcome(f"the MCP server {name!r} failed: {reason}")
        finally:
            server.running = None
            for asking in running.asking:
                asking.cancel()
        if not isinstance(result, types.CallToolResult):
            return error_outcome(f"the MCP server {name!r} answered with no tool result")
        content = [_content(block) for block in result.content]
        raw = result.structured_content if result.structured_content is not None else UNSET
        content, raw = cap_result(content, raw, ctx.limits.mcp_result_bytes)
        return ToolOutcome(content, result.is_error, raw)


async def _elicit(
    server: _Server, context: Any, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    """An elicitation request of the MCP server, passed through to the client as a form of the
    call that runs now. Declined when no call of this server runs, when the client did not
    advertise form elicitation (it is never sent one), when the server asks for a URL or for a
    form ACP cannot show; cancelled when the call ends first."""
    running = server.running
    name = server.config.name
    if running is None or not running.ctx.client.capabilities.elicitation_form:
        log.info("MCP server %r asked the user a question: declined (no form to show)", name)
        return types.ElicitResult(action="decline")
    if not isinstance(params, types.ElicitRequestFormParams):
        log.info("MCP server %r asked for a URL elicitation: declined", name)
        return types.ElicitResult(action="decline")
    try:
        form = form_from_mcp(params.requested_schema)
    except FormRefused as exc:
        log.info("MCP server %r asked with a form ACP cannot show: %s", name, exc)
        return types.ElicitResult(action="decline")
    ctx, call = running.ctx, running.call
    with anyio.CancelScope() as asking:
        running.asking.add(asking)
        try:
            action, content = await elicit(
                ctx.client, ctx.session_id, call.call_id, params.message, form
            )
        except (ClientRequestError, ToolError) as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=str(exc))
        finally:
            running.asking.discard(asking)
        return types.ElicitResult(action=action, content=content)
    return types.ElicitResult(action="cancel")  # the call ended while the user was asked


def cap_result(
    content: list[ToolResultContent], structured: Any, cap: int
) -> tuple[list[ToolResultContent], Any]:
    """An MCP result's content and structured content (or `UNSET`) within `cap` bytes in all,
    with a closing text block that says what was left out when anything was.

    The content comes first, in its order, for it is what the model reads; the structured
    content (only `rawOutput`) gets what it leaves. Text counts its UTF-8 bytes; the text that
    reaches the cap is cut there, never inside a character, and nothing after it is kept. Every
    other block (image, audio, resource, link) counts its size as JSON, base64 data included,
    and so does the structured content: each is kept whole if it fits in what is left, or else
    left out whole (a cut image or JSON value is nothing), and a later, smaller one may still
    fit.
    """
    left = cap
    total = 0
    kept: list[ToolResultContent] = []
    text_cut = 0
    left_out: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            data = block.text.encode()
            total += len(data)
            if len(data) <= left:
                kept.append(block)
                left -= len(data)
                continue
            shown = complete_utf8_prefix(data[:left])
            if shown:
                kept.append(TextContent(shown.decode()))
            text_cut += len(data) - len(shown)
            left = 0  # the cut is the end: nothing after it may read as what followed
            continue
        size = len(msgspec.json.encode(block))
        total += size
        if size <= left:
            kept.append(block)
            left -= size
        else:
            left_out.append(f"the {block.__struct_config__.tag} block of {size} bytes")
    if structured is not UNSET:
        size = len(msgspec.json.encode(structured))
        total += size
        if size > left:
            left_out.append(f"the structured content of {size} bytes")
            structured = UNSET
    if text_cut:
        left_out.insert(0, f"{text_cut} bytes of text")
    if not left_out:
        return content, structured
    note = (
        f"[truncated: the MCP server's result is {total} bytes, over the {cap}-byte limit; "
        f"left out: {', '.join(left_out)}]"
    )
    return [*kept, TextContent(note)], structured


def _object_arguments(raw: str) -> dict[str, Any]:
    arguments = msgspec.json.decode(raw)
    if not isinstance(arguments, dict):
        raise msgspec.ValidationError(f"Expected `object`, got `{_json_type(arguments)}`")
    return arguments


def _json_type(value: Any) -> str:
    names = {list: "array", str: "str", int: "int", float: "float", bool: "bool"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _page in range(100):  # a server whose cursor never ends cannot hold us forever
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        listed = await session.list_tools(params=params)
        tools.extend(listed.tools)
        cursor = listed.next_cursor
        if cursor is None:
            break
    return tools


def _opt(value: Any) -> Any:
    return UNSET if value is None else value


def _content(block: Any) -> ToolResultContent:
    """An MCP content block as the ACP content block it maps to."""
    if isinstance(block, types.TextContent):
        return TextContent(block.text)
    if isinstance(block, types.ImageContent):
        return ImageContent(block.data, block.mime_type)
    if isinstance(block, types.AudioContent):
        return AudioContent(block.data, block.mime_type)
    if isinstance(block, types.ResourceLink):
        return ResourceLink(
            str(block.uri),
            block.name,
            title=_opt(block.title),
            description=_opt(block.description),
            mime_type=_opt(block.mime_type),
            size=_opt(block.size),
        )
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            contents = ResourceContents(
                str(resource.uri), text=resource.text, mime_type=_opt(resource.mime_type)
            )
        else:
            contents = ResourceContents(
                str(resource.uri), blob=resource.blob, mime_type=_opt(resource.mime_type)
            )
        return EmbeddedResource(contents)
    return TextContent(f"[{getattr(block, 'type', 'unknown')} content from the MCP server]")
