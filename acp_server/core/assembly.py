"""Assembling a step's stream: chunks in, the `assistant/message` content blocks out.

Blocks are keyed by their stream `index` and kept in the order they first appear. A cancelled
stream keeps its text and reasoning but drops tool calls, which could be incomplete and would
leave the provider history invalid.
"""

from __future__ import annotations

import msgspec

from .chunk_rows import ChunkRow, TextChunks, ToolCallChunks
from .stream import (
    AssistantBlock,
    AssistantReasoning,
    AssistantText,
    AssistantToolCall,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningDelta,
    ReasoningSignature,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)


class _Block(msgspec.Struct):
    kind: str  # "text", "reasoning" or "tool-call"
    parts: list[str] = msgspec.field(default_factory=list)
    id: str = ""
    name: str = ""
    signature: str | None = None


class MessageAssembler(msgspec.Struct):
    blocks: dict[int, _Block] = msgspec.field(default_factory=dict)
    usage: Usage | None = None
    finish: FinishReason | None = None
    chunks: int = 0

    def feed(self, chunk: StreamChunk) -> None:
        self.chunks += 1
        if type(chunk) is TextDelta:
            self._block(chunk.index, "text").parts.append(chunk.text)
        elif type(chunk) is ReasoningDelta:
            self._block(chunk.index, "reasoning").parts.append(chunk.text)
        elif type(chunk) is ToolCallDelta:
            block = self._block(chunk.index, "tool-call")
            block.id = block.id or chunk.id
            if isinstance(chunk.name, str) and not block.name:
                block.name = chunk.name
            block.parts.append(chunk.arguments_delta)
        elif type(chunk) is ReasoningSignature:
            self._block(chunk.index, "reasoning").signature = chunk.signature
        elif type(chunk) is BlockStart:
            self._block(chunk.index, chunk.block_type)
        elif type(chunk) is UsageChunk:
            self.usage = chunk.usage
        elif type(chunk) is Finish:
            self.finish = chunk.reason

    def feed_row(self, row: ChunkRow) -> None:
        """Feed every member of a chunk row at once (the same as feeding them one by one)."""
        if isinstance(row, ToolCallChunks):
            calls = row.data
            block = self._block(calls.index, "tool-call")
            block.id = block.id or calls.id
            if isinstance(calls.name, str) and not block.name:
                block.name = calls.name
            block.parts.extend(calls.args)
            self.chunks += len(calls.args)
        else:
            d = row.data
            kind = "text" if type(row) is TextChunks else "reasoning"
            self._block(d.index, kind).parts.extend(d.texts)
            self.chunks += len(d.texts)

    def _block(self, index: int, kind: str) -> _Block:
        block = self.blocks.get(index)
        if block is None:
            block = self.blocks[index] = _Block(kind)
        return block

    def content(self, *, interrupted: bool = False) -> list[AssistantBlock]:
        """The assembled blocks; for an interrupted stream, its text and reasoning only."""
        content: list[AssistantBlock] = []
        for block in self.blocks.values():
            text = "".join(block.parts)
            if interrupted and not text:
                continue  # nothing of an empty block reached the client
            if block.kind == "text":
                content.append(AssistantText(text))
            elif block.kind == "reasoning":
                # A signature comes after its block's last fragment: a signed block is whole.
                if block.signature is not None:
                    content.append(AssistantReasoning(text, block.signature))
                else:
                    content.append(AssistantReasoning(text))
            elif not interrupted:
                content.append(AssistantToolCall(block.id, block.name, text))
        return content

    def tool_calls(self) -> list[AssistantToolCall]:
        return [b for b in self.content() if isinstance(b, AssistantToolCall)]
