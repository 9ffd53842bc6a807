"""The server's own system prompt, rendered from its inputs without I/O.

The prompt is a fixed text (one of the package's `agent/prompts`, or `--system-prompt-file`'s)
followed by what the session is: its directories, the platform, shell and date, its mode and
what that mode allows, its tools and what each is for, and the project's instruction files
(`AGENTS.md`, `CLAUDE.md`), farthest from the working directory first so that the nearest one,
read last, takes precedence. `render_system_prompt` makes the text from a `PromptContext`;
`cap_instructions` orders and caps the instruction files (32 KiB in all, the nearest kept
whole first). The same inputs give the same text, byte for byte: the log keeps the inputs
(`session/context`), so what was sent can be rendered again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Final

from msgspec import Struct

from .messages import ToolDefinition
from .modes import MODES

INSTRUCTIONS_CAP: Final = 32 * 1024
"""The most bytes of project instructions a system prompt holds, all files together."""

_SENTENCE_END: Final = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z`])")
"""A full stop that ends a sentence (not the one of "e.g. `**/*.py`")."""

PURPOSE_CHARS: Final = 200
"""The longest purpose of a tool in the prompt's tool list (its description's first sentence)."""

MODE_RULES: Final[dict[str, str]] = {
    "default": (
        "writes, edits and commands ask the user for permission first. A call the user "
        "rejects comes back as an error: do not repeat it unchanged; ask or take another way."
    ),
    "accept-edits": (
        "writes and edits inside the session's directories go ahead without asking; commands "
        "ask the user for permission first."
    ),
    "plan": (
        "writes, edits and commands are refused. Read and search to understand the task, then "
        "present a plan; the user switches modes to carry it out."
    ),
    "full-access": (
        "every tool goes ahead without asking. Take particular care with commands that "
        "delete or overwrite."
    ),
}
"""What each mode (SPEC 4.4) allows, as the model is told it."""


class PromptBase(Struct, frozen=True):
    """The fixed text a system prompt starts with, and where it came from."""

    text: str
    source: str
    """`acp-server:<name>` for a text of the package, else the file's path."""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


class InstructionText(Struct, frozen=True):
    """One instruction file's text as the prompt holds it."""

    path: str
    text: str
    cut: bool = False
    """Only the text's beginning is here: the cap left no room for the rest."""


class PromptContext(Struct, frozen=True, kw_only=True):
    """Everything a rendered system prompt says besides its fixed text."""

    cwd: str
    additional_directories: Sequence[str] = ()
    platform: str
    shell: str | None = None
    date: str
    mode: str
    tools: Sequence[ToolDefinition] = ()
    instructions: Sequence[InstructionText] = ()
    """Farthest from the working directory first."""


def render_system_prompt(base: str, context: PromptContext) -> str:
    """The system prompt: `base`, then the session's environment, mode, tools and project
    instructions, each a Markdown section."""
    environment = [f"- Working directory: {context.cwd}"]
    if context.additional_directories:
        environment.append("- Additional directories: " + ", ".join(context.additional_directories))
    environment.append(f"- Platform: {context.platform}")
    if context.shell:
        environment.append(f"- Shell: {context.shell}")
    environment.append(f"- Date: {context.date}")
    sections = [
        base.strip(),
        "# Environment\n\n" + "\n".join(environment),
        f"# Mode\n\nThe session is in {context.mode} mode: {mode_rule(context.mode)}",
    ]
    if context.tools:
        lines = [f"- {tool.name}: {tool_purpose(tool.description)}" for tool in context.tools]
        sections.append("# Tools\n\n" + "\n".join(lines))
    if context.instructions:
        parts = [
            "# Project instructions\n\nThe project's instruction files follow, the farthest "
            "from the working directory first. Follow them; where two disagree, the later "
            "one (nearer the working directory) takes precedence. The user's own requests "
            "take precedence over all of them."
        ]
        for item in context.instructions:
            cut = " (cut: only its beginning fits)" if item.cut else ""
            parts.append(f"## {item.path}{cut}\n\n{item.text.strip()}")
        sections.append("\n\n".join(parts))
    return "\n\n".join(sections) + "\n"


def mode_rule(mode: str) -> str:
    """What `mode` allows, for the model; a mode this module does not know by its own
    description."""
    rule = MODE_RULES.get(mode)
    if rule is not None:
        return rule
    for info in MODES:
        if info.id == mode:
            return info.description + "."
    return "its tools ask the user for permission as the user set it."


def tool_purpose(description: str) -> str:
    """A tool's purpose: the first sentence of its description (the whole first line when it
    has no sentence end: a full stop, not of "e.g." or "i.e.", before a capital letter or a
    backtick), cut at `PURPOSE_CHARS`."""
    line = description.strip().split("\n", 1)[0]
    end = _SENTENCE_END.search(line)
    sentence = line[: end.start() + 1] if end is not None else line
    if len(sentence) > PURPOSE_CHARS:
        sentence = sentence[: PURPOSE_CHARS - 1].rstrip() + "…"
    return sentence


# ---------------------------------------------------------------------------------------------
# The project instruction files.


class InstructionSource(Struct, frozen=True):
    """One instruction file as it was read: its bytes, or None when it was too large to read."""

    path: str
    data: bytes | None
    size: int


class CappedInstructions(Struct, frozen=True):
    """The instruction texts that fit the cap (farthest first), and what the cap cut."""

    texts: list[InstructionText]
    cut: list[tuple[str, int, int]]
    """(path, bytes kept, bytes) of each file cut short or left out (0 kept), farthest first."""


def cap_instructions(
    sources: Sequence[InstructionSource], cap: int = INSTRUCTIONS_CAP
) -> CappedInstructions:
    """`sources` (farthest first) within `cap` bytes in all. The nearest file takes precedence,
    so the room goes to the nearest first and the farthest are cut; a file is cut at a
    character boundary, and one left with nothing is left out; an empty one says nothing.
    Bytes that are not UTF-8 read as U+FFFD."""
    room = cap
    kept: list[InstructionText | None] = []
    cut: list[tuple[str, int, int]] = []
    for source in reversed(sources):
        data = source.data
        if data is None:
            kept.append(None)
            cut.append((source.path, 0, source.size))
            continue
        encoded = data.decode("utf-8", "replace").encode()
        if not encoded.strip():
            continue  # an empty file says nothing
        if len(encoded) <= room:
            room -= len(encoded)
            kept.append(InstructionText(source.path, encoded.decode()))
            continue
        text = encoded[:room].decode("utf-8", "ignore")  # a split character is dropped
        size = len(text.encode())
        room -= size
        cut.append((source.path, size, source.size))
        kept.append(InstructionText(source.path, text, cut=True) if text.strip() else None)
    kept.reverse()
    cut.reverse()
    return CappedInstructions([item for item in kept if item is not None], cut)


def cut_description(cut: Sequence[tuple[str, int, int]], cap: int = INSTRUCTIONS_CAP) -> str:
    """The notice's text for the files `cap_instructions` cut."""
    parts = []
    for path, kept, size in cut:
        if kept == 0:
            parts.append(f"{path} was left out ({size} bytes)")
        else:
            parts.append(f"{path} was cut to {kept} of its {size} bytes")
    return (
        f"The project instructions hold at most {cap // 1024} KiB in all, the files nearest "
        "the working directory first: " + "; ".join(parts) + "."
    )
