"""The system prompt of a session's model requests: the server's own, rendered from the
session's context, and the client's (ACP `systemPrompt`, SPEC 1.2 `session/context`).

The server's own (`render_system_prompt`) is a fixed text (`PromptBase`: the package's, or
`--system-prompt-file`'s) with the session's directories, platform, shell, date, mode, tools
and project instruction files. When a session goes live and before each turn that calls the
model, `update_context` reads the instruction files again and logs a `session/context` event
when they or the settings (platform, shell, date, fixed text) differ from what the log holds;
when the 32 KiB cap cut them, a `session/notice` says so. Without a `PromptBase` (llm-replay,
which ignores a system prompt, unless `--system-prompt-file` was given) the server sends none
of its own and logs none of this.

`session/new`, `session/load`, `session/resume` and `session/fork` may carry a `systemPrompt`:
`append` (after the server's own system prompt) or `override` (instead of it), text content only.
It is checked before anything changes (a refused one creates, loads, resumes or forks nothing),
kept in the log as a `session/context` event when it differs from what the log holds (a fork's:
what its copied prefix holds), and read from the log by every model request of the session
(`system_for`). A load, resume or fork without one keeps what the log holds: the client's
instructions stay with the session.
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, get_args

import anyio
from msgspec import UNSET, UnsetType

from ..core.content import TextContent
from ..core.events import (
    PromptSettings,
    SessionContext,
    SessionContextData,
    SessionNoticeData,
    SystemPromptMode,
)
from ..core.messages import ToolDefinition
from ..core.prompt_render import (
    INSTRUCTIONS_CAP,
    PromptBase,
    PromptContext,
    cap_instructions,
    cut_description,
    render_system_prompt,
)
from ..core.system_prompt import compose_system, context_change, inputs_change, latest_context
from .errors import InvalidParams
from .live import LiveSession
from .protocol import SystemPrompt

if TYPE_CHECKING:
    from .config import ServeConfig

MODES: Final[tuple[str, ...]] = get_args(SystemPromptMode)


def check_system_prompt(value: SystemPrompt | UnsetType | None) -> SystemPrompt | None:
    """The request's `systemPrompt` when it is one the server applies; None when it has none;
    -32602 naming the field otherwise (an unknown mode is refused, never taken for another)."""
    if value is UNSET or value is None:
        return None
    if value.mode not in MODES:
        raise InvalidParams.at(
            "$.systemPrompt.mode",
            f"unknown system prompt mode {value.mode!r}; the modes are: {', '.join(MODES)}",
        )
    if not value.content:
        raise InvalidParams.at("$.systemPrompt.content", "must hold at least one content block")
    for index, block in enumerate(value.content):
        if not isinstance(block, TextContent):
            raise InvalidParams.at(
                f"$.systemPrompt.content[{index}]",
                f"a system prompt takes text blocks only, not {block.__struct_config__.tag}",
            )
    return value


def session_context(session: LiveSession) -> SessionContextData | None:
    """The session's latest `session/context` data, folded from its log once and then kept."""
    if session.context is UNSET:
        session.context = latest_context(session.log.plain_events())
    return session.context


def forget_context(session: LiveSession) -> None:
    """The session's events were re-read (a load, a resume): fold them again when asked."""
    session.context = UNSET


def server_prompt(config: ServeConfig | None) -> PromptBase | None:
    """The fixed text of the server's own system prompt: `--system-prompt-file`'s, else the
    package's for a live provider's family; None for llm-replay, which ignores it."""
    if config is None:
        return None
    if config.system_prompt is not None:
        return config.system_prompt
    from ..providers.registry import REPLAY

    if config.provider == REPLAY:
        return None
    from ..agent.prompts import builtin_prompt

    return builtin_prompt(config.provider)


def prompt_settings(base: PromptBase) -> PromptSettings:
    """The settings of a system prompt rendered now over `base`."""
    # The name only: a path is the user's business, and Windows names its shell in COMSPEC.
    shell = os.environ.get("SHELL") or os.environ.get("COMSPEC") or ""
    shell = os.path.basename(shell.rstrip("/\\"))
    return PromptSettings(
        prompt=base.source,
        prompt_sha256=base.sha256,
        platform=platform.system() or "unknown",
        date=datetime.date.today().isoformat(),
        shell=shell or UNSET,
    )


async def update_context(
    session: LiveSession,
    prompt: SystemPrompt | None,
    base: PromptBase | None,
    config_dir: Path | None,
) -> SessionNoticeData | None:
    """Log what shapes the session's system prompt from here on, as one `session/context`
    event, when it differs from what the log holds: the client's `prompt` (None: the log's
    stays), and with a `base` the server prompt's inputs read now (the instruction files, the
    user's in `config_dir` first, and the settings). Returns the notice to log and show when
    the cap cut newly read instruction files, else None.

    Called only where no step of the session runs (the event must not land among a step's
    chunks): when it goes live, and at the start of a turn."""
    current = session_context(session)
    data = current
    if prompt is not None:
        mode: SystemPromptMode = "append" if prompt.mode == "append" else "override"
        data = context_change(current, mode, prompt.content) or current
    notice = None
    if base is not None:
        from ..agent.instructions import read_instructions  # with the tools: a live provider's

        read = await anyio.to_thread.run_sync(read_instructions, Path(session.cwd), config_dir)
        capped = cap_instructions(read.sources, INSTRUCTIONS_CAP)
        session.instructions = capped.texts
        changed = inputs_change(data, read.files, prompt_settings(base))
        if changed is not None:
            data = changed
            if capped.cut:
                description = cut_description(capped.cut, INSTRUCTIONS_CAP)
                notice = SessionNoticeData("warning", "Project instructions cut", description)
    if data is current or data is None:
        return None  # nothing new (the notice, if any, was given with the inputs it cut)
    with session.activity():
        session.recorder.append(SessionContext, data)
        session.context = data
        await session.recorder.sync()
    return notice


def system_for(
    session: LiveSession,
    base: PromptBase | None,
    mode: str,
    tools: Sequence[ToolDefinition],
) -> str | None:
    """The system prompt of the session's next model request: the server's own over `base`
    (None: it has none), in `mode` with `tools`, and the client's over it."""
    context = session_context(session)
    default = None
    if base is not None:
        settings = context.settings if context is not None else UNSET
        if isinstance(settings, UnsetType):  # not refreshed yet (a child's parent was)
            settings = prompt_settings(base)
        default = render_system_prompt(
            base.text,
            PromptContext(
                cwd=session.cwd,
                additional_directories=session.additional_directories,
                platform=settings.platform,
                shell=settings.shell if isinstance(settings.shell, str) else None,
                date=settings.date,
                mode=mode,
                tools=tools,
                instructions=session.instructions,
            ),
        )
    return compose_system(default, context)
