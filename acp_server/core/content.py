"""ACP content blocks as the session log holds them: the `ContentBlock` union of the ACP v1
schema (a user message's or a command result's content), and `ToolResultContent`, which also
admits ACP's `diff` (a tool result's content).

Optional fields default to `UNSET`, so "absent" and "null" stay distinct; `_meta` is kept
exactly as given.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, UnsetType, field

from .structs import Model, Tagged

Meta_ = dict[str, Any] | None | UnsetType
"""ACP's `_meta`: an object or null, kept exactly as given."""


class TextContent(Tagged, tag="text"):
    text: str
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ImageContent(Tagged, tag="image"):
    data: str
    mime_type: str
    uri: str | UnsetType | None = UNSET
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class AudioContent(Tagged, tag="audio"):
    data: str
    mime_type: str
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ResourceLink(Tagged, tag="resource_link"):
    uri: str
    name: str
    title: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    mime_type: str | UnsetType | None = UNSET
    size: int | UnsetType | None = UNSET
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ResourceContents(Model):
    """ACP's text or blob resource contents (exactly one of `text` and `blob` is set)."""

    uri: str
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET
    mime_type: str | UnsetType | None = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class EmbeddedResource(Tagged, tag="resource"):
    resource: ResourceContents
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


class DiffContent(Tagged, tag="diff"):
    """A file change in a tool result (ACP's `Diff` tool call content)."""

    path: str
    new_text: str
    old_text: str | UnsetType | None = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


ToolResultContent = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | DiffContent
)
