"""The modes and config options a session of a default server shows (SPEC 4.4), as JSON.

A default server replays recordings (llm-replay) and starts sessions in `default` mode;
`session/new`, `session/load` and `session/resume` answer these, and tests compare with them.
"""

from __future__ import annotations

from typing import Any

MODE_NAMES: list[tuple[str, str, str]] = [
    ("default", "Default", "Asks before writes, edits and commands"),
    (
        "accept-edits",
        "Accept edits",
        "Writes and edits inside the session's directories go ahead; commands ask",
    ),
    ("plan", "Plan", "Reads and plans only: writes, edits and commands are refused"),
    ("full-access", "Full access", "Every tool goes ahead without asking"),
]


def modes(current: str = "default") -> dict[str, Any]:
    return {
        "currentModeId": current,
        "availableModes": [{"id": i, "name": n, "description": d} for i, n, d in MODE_NAMES],
    }


def config_options(
    mode: str = "default", model: str = "llm-replay", models: list[str] | None = None
) -> list[dict[str, Any]]:
    return [
        {
            "type": "select",
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "currentValue": mode,
            "options": [{"value": i, "name": n, "description": d} for i, n, d in MODE_NAMES],
        },
        {
            "type": "select",
            "id": "model",
            "name": "Model",
            "category": "model",
            "currentValue": model,
            "options": [{"value": m, "name": m} for m in (models or [model])],
        },
    ]


def session_setup(mode: str = "default") -> dict[str, Any]:
    """What `session/resume` and a plain `session/load` answer."""
    return {"modes": modes(mode), "configOptions": config_options(mode)}


COMMANDS: list[dict[str, Any]] = [
    {"name": "mode", "description": "Switch the session's mode", "input": {"hint": "mode id"}},
    {"name": "model", "description": "Switch the session's model", "input": {"hint": "model id"}},
    {"name": "title", "description": "Set the session's title", "input": {"hint": "title"}},
    {"name": "stats", "description": "Show the session log's figures"},
    {
        "name": "compact",
        "description": "Summarise the conversation so far to free the model's context",
        "input": {"hint": "instructions for the summary (optional)"},
    },
    {
        "name": "init",
        "description": "Ask the model to write a starting AGENTS.md for the project",
        "input": {"hint": "what to focus on (optional)"},
    },
    {
        "name": "rewind",
        "description": "Restore the files as they were before a message and leave the later "
        "turns out of the conversation (no number: list the messages)",
        "input": {"hint": "message number (optional)"},
    },
    {"name": "mcp", "description": "Show the session's MCP servers, their state and their tools"},
    {"name": "help", "description": "List the commands"},
]
