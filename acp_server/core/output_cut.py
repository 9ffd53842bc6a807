"""The cut of a replayed tool output (SPEC 4.2): a result over 64 KiB is shown cut to 64 KiB.

A load replays what a client shows, and a 1 MiB command output replayed whole costs every load
its bytes while the user looks at its first screen. The replay shows a prefix of the output
instead and says where the whole one is: the `tool/result`'s seq, which `session.page` serves
with the output exactly as the log keeps it. Only replays are cut; a live turn and a page show
every byte.

An output is its content blocks, then its `rawOutput`. A text block counts its UTF-8 bytes and is
cut inside itself (never inside a character); any other block (a diff, an image, a resource)
counts its size as JSON and is shown whole or not at all, for half an image or a diff is
nothing. What is kept is a prefix: after the first block that does not fit, nothing is shown,
so the replay never reads as if a later block followed the cut one. The `rawOutput` is kept when
it fits in what the content left.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET

from .content import TextContent, ToolResultContent
from .events import ToolResultData
from .structs import Seq

REPLAY_OUTPUT_LIMIT: Final = 65_536
"""The most bytes of one tool output a replay shows."""


class OutputCut(msgspec.Struct, frozen=True, gc=False):
    """Where the whole of a cut output is (`_meta["acp-server"].cut`)."""

    seq: Seq
    """The seq of the `tool/result` that holds it: page through this seq to read it."""
    bytes: int
    """The output's size as counted here (text in UTF-8 bytes, other blocks as JSON)."""


def output_size(result: ToolResultData) -> int:
    """The bytes of a tool output as the cut counts them."""
    size = sum(_block_size(block) for block in result.content)
    if result.raw_output is not UNSET:
        size += len(msgspec.json.encode(result.raw_output))
    return size


def cut_output(
    result: ToolResultData, seq: int, limit: int = REPLAY_OUTPUT_LIMIT
) -> tuple[ToolResultData, OutputCut | None]:
    """`result` as a replay shows it, the `tool/result` at `seq`: unchanged when its output is
    at most `limit` bytes, else its first `limit` bytes, with where the whole is."""
    total = output_size(result)
    if total <= limit:
        return result, None
    left = limit
    kept: list[ToolResultContent] = []
    for block in result.content:
        if type(block) is TextContent:
            data = block.text.encode()
            if len(data) <= left:
                kept.append(block)
                left -= len(data)
                continue
            # A prefix of valid UTF-8 is invalid only in a character the cut split: dropping
            # it is the cut at the character boundary.
            text = data[:left].decode(errors="ignore")
            if text:
                kept.append(msgspec.structs.replace(block, text=text))
            left = 0
            break
        size = _block_size(block)
        if size > left:
            left = 0
            break
        kept.append(block)
        left -= size
    raw = result.raw_output
    if raw is not UNSET and len(msgspec.json.encode(raw)) > left:
        raw = UNSET
    return msgspec.structs.replace(result, content=kept, raw_output=raw), OutputCut(seq, total)


def _block_size(block: ToolResultContent) -> int:
    if type(block) is TextContent:
        return len(block.text.encode())
    return len(msgspec.json.encode(block))
