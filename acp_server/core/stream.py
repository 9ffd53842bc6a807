"""A model's answer: the stream chunks a provider yields, one per streamed fragment (logged as
`assistant/chunk` events), the usage a call reports, and the assistant content blocks assembled
from the chunks (an `assistant/message`'s content).
"""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, UnsetType

from .structs import Model, Tagged

# ---------------------------------------------------------------------------------------------
# Stream chunks.

BlockType = Literal["text", "reasoning", "tool-call"]
FinishReason = Literal["stop", "tool-calls", "length", "content-filter"]


class BlockStart(Tagged, tag="block-start"):
    index: int
    block_type: BlockType


class TextDelta(Tagged, tag="text-delta"):
    index: int
    text: str


class ReasoningDelta(Tagged, tag="reasoning-delta"):
    index: int
    text: str


class ReasoningSignature(Tagged, tag="reasoning-signature"):
    """The provider's signature over a reasoning block's text (Anthropic's thinking blocks):
    opaque, sent back with the block in later requests so that the provider accepts it."""

    index: int
    signature: str


class ToolCallDelta(Tagged, tag="tool-call-delta"):
    index: int
    id: str
    arguments_delta: str
    name: str | UnsetType = UNSET


class BlockEnd(Tagged, tag="block-end"):
    index: int


class Usage(Model):
    input_tokens: int
    """Every input token of the call, cached ones included."""
    output_tokens: int
    cached_input_tokens: int | UnsetType = UNSET
    """Of `input_tokens`, those read from the provider's prompt cache."""
    cache_write_input_tokens: int | UnsetType = UNSET
    """Of `input_tokens`, those written to the provider's prompt cache (where it says)."""


class UsageChunk(Tagged, tag="usage"):
    usage: Usage


class Finish(Tagged, tag="finish"):
    reason: FinishReason


StreamChunk = (
    BlockStart
    | TextDelta
    | ReasoningDelta
    | ReasoningSignature
    | ToolCallDelta
    | BlockEnd
    | UsageChunk
    | Finish
)

# ---------------------------------------------------------------------------------------------
# Assembled assistant content.


class AssistantText(Tagged, tag="text"):
    text: str


class AssistantReasoning(Tagged, tag="reasoning"):
    text: str
    signature: str | UnsetType = UNSET
    """The provider's signature over `text`, when it signs its reasoning (see
    `ReasoningSignature`); a signed block goes back to the provider as it came."""


class AssistantToolCall(Tagged, tag="tool-call"):
    id: str
    name: str
    arguments: str
    """The raw JSON text the model produced, unparsed."""


AssistantBlock = AssistantText | AssistantReasoning | AssistantToolCall
