"""Automatic session titles (SPEC 4.4), without I/O: when a session gets one, and its text.

After a session's first completed model turn, a session with no title yet gets one made from
its first prompt: by the model (`--titles model`, a live provider's default: `title_request`
is what it is asked, `model_title` what is kept of its answer) or from the prompt's own first
line (`--titles prompt`, llm-replay's default, and the fallback when the model's call fails:
`prompt_title`). A title the log already holds (typed with `/title`, set with
`session/set_title`, copied by a fork, loaded) is never replaced: `title_due` says no.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal, get_args

from .commands import parse_command
from .content import ContentBlock, TextContent
from .events import SessionEvent, SessionTitle, TurnEnd, TurnEndReasonCompleted, UserMessageEvent

TitleMode = Literal["model", "prompt", "off"]
TITLE_MODES: Final[tuple[TitleMode, ...]] = get_args(TitleMode)

MAX_TITLE_CHARS: Final = 60
"""The longest automatic title, its ellipsis included."""
ELLIPSIS: Final = "…"
MAX_REQUEST_CHARS: Final = 2000
"""The most of the first prompt the model is shown to name the session."""
TITLE_MAX_TOKENS: Final = 64
"""The most output tokens the title's model call may take (a few words; a little room for a
model that thinks first)."""
QUOTES: Final = "\"'`*#\u201c\u201d\u2018\u2019"
"""What a model may wrap a title in: quotes (typographic ones too), emphasis, a heading's mark."""
TITLE_SYSTEM: Final = (
    "You name conversations. Reply with a short title (at most six words) for the "
    "conversation the user's message starts: the title alone, without quotes or a final "
    "period."
)


def default_title_mode(live: bool) -> TitleMode:
    """`model` on a live provider; `prompt` on llm-replay, whose recordings hold no title call
    (SPEC 5: its model calls are the turns' steps)."""
    return "model" if live else "prompt"


def title_due(events: Iterable[SessionEvent]) -> str | None:
    """The first prompt's text, when the session is due an automatic title now: it has no
    title, its last turn was a model turn (not a command's) that completed, and its first
    prompt to the model has text. None otherwise."""
    last_end: TurnEnd | None = None
    prompts: dict[int, list[ContentBlock]] = {}
    """Each model turn's prompt by turn number (a command's turn, `/compact` included, is
    left out)."""
    for event in events:  # one pass, stopping at a title: this runs after every model turn
        if type(event) is SessionTitle:
            return None
        if type(event) is TurnEnd:
            last_end = event
        elif type(event) is UserMessageEvent and parse_command(event.data.message.content) is None:
            prompts[event.data.turn] = event.data.message.content
    if last_end is None or type(last_end.data.reason) is not TurnEndReasonCompleted:
        return None
    if last_end.data.turn not in prompts:
        return None
    first = _text(prompts[min(prompts)])
    return first if first.strip() else None


def prompt_title(text: str, limit: int = MAX_TITLE_CHARS) -> str | None:
    """The title made from a prompt: its first line that is not blank, runs of whitespace made
    one space, cut at the last word that fits in `limit` characters with an ellipsis (a first
    word longer than that is cut inside); None when the text is blank."""
    line = next((" ".join(line.split()) for line in text.splitlines() if line.strip()), "")
    if not line:
        return None
    if len(line) <= limit:
        return line
    room = line[: limit - len(ELLIPSIS) + 1]  # one more: a space there ends a whole word
    cut = room.rfind(" ")
    kept = room[:cut] if cut > 0 else room[:-1]
    return kept.rstrip(" ,;:.-") + ELLIPSIS


def title_request(first_prompt: str) -> str:
    """The user message of the title's model call: the start of the first prompt."""
    shown = first_prompt.strip()
    if len(shown) > MAX_REQUEST_CHARS:
        shown = shown[:MAX_REQUEST_CHARS] + ELLIPSIS
    return shown


def model_title(answer: str) -> str | None:
    """What is kept of the model's answer: its first line without the quotes, emphasis, a
    `Title:` label or the final period a model may add anyway, cut as `prompt_title` cuts;
    None when nothing is left."""
    line = next((line.strip() for line in answer.splitlines() if line.strip()), "")
    if line.lower().startswith("title:"):
        line = line[len("title:") :]
    line = line.strip().strip(QUOTES).strip()
    if line.endswith(".") and not line.endswith(".."):
        line = line[:-1]
    return prompt_title(line)


def _text(content: Iterable[ContentBlock]) -> str:
    return "\n".join(block.text for block in content if type(block) is TextContent)
