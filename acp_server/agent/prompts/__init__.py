"""The fixed texts of the server's own system prompt, one per provider family where they differ.

Each is a plain text file of this package; `builtin_prompt` names the one a provider family
gets. The session's context (directories, platform, mode, tools, project instructions) is
added to it by `acp_server.core.prompt_render`; `--system-prompt-file` replaces it.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

from ...core.prompt_render import PromptBase

PROMPT_FILES: Final[dict[str, str]] = {"openai": "default.md", "anthropic": "default.md"}
"""The text each provider family gets; a family not named gets `default.md`."""


def builtin_prompt(family: str) -> PromptBase:
    """The package's fixed text for the provider `family` (`openai`, `anthropic`, ...)."""
    name = PROMPT_FILES.get(family, "default.md")
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return PromptBase(text, f"acp-server:{name.removesuffix('.md')}")
