"""How large one prompt block may be (SPEC 4.4): a check without I/O.

Images, audio and embedded resources travel inline, base64 or text. One block over
`MAX_BLOCK_BYTES` is refused before anything is logged, naming the block, so that one paste
cannot make every later request of the session too large for the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from msgspec import UNSET

from .content import AudioContent, ContentBlock, EmbeddedResource, ImageContent, TextContent

MAX_BLOCK_BYTES: Final = 20 * 1024 * 1024


def block_size(block: ContentBlock) -> int:
    """The bytes a block carries inline (its text, or its base64 data as sent)."""
    if isinstance(block, (ImageContent, AudioContent)):
        return len(block.data)
    if isinstance(block, TextContent):
        return len(block.text.encode("utf-8"))
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if resource.blob is not UNSET:
            return len(resource.blob)
        if resource.text is not UNSET:
            return len(resource.text.encode("utf-8"))
    return 0


def oversized_block(
    prompt: Sequence[ContentBlock], limit: int = MAX_BLOCK_BYTES
) -> tuple[int, int] | None:
    """The index and size of the first block over `limit` bytes, or None."""
    for index, block in enumerate(prompt):
        size = block_size(block)
        if size > limit:
            return index, size
    return None
