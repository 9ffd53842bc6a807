"""`cap_result`: one MCP tool result kept within a byte cap, with a note on what was left out.

Text is cut at the cap (never inside a character); any other block, and the structured
content, is kept whole or left out whole (a cut image or JSON value means nothing).
"""

from __future__ import annotations

from msgspec import UNSET

from acp_server.agent.tools.mcp import cap_result
from acp_server.core.content import ImageContent, ResourceLink, TextContent

IMAGE = ImageContent("A" * 20, "image/png")
"""69 bytes as JSON."""
LINK = ResourceLink("file:///a", "a")
"""53 bytes as JSON."""


def test_a_result_within_the_cap_is_kept_as_it_is() -> None:
    content = [TextContent("hi"), IMAGE, LINK]
    structured = {"result": "hi"}

    assert cap_result(content, structured, 200) == (content, structured)


def test_text_is_cut_at_the_cap_across_blocks_with_a_note() -> None:
    content = [TextContent("a" * 6), TextContent("b" * 6)]

    assert cap_result(content, UNSET, 10) == (
        [
            TextContent("aaaaaa"),
            TextContent("bbbb"),
            TextContent(
                "[truncated: the MCP server's result is 12 bytes, over the 10-byte limit; "
                "left out: 2 bytes of text]"
            ),
        ],
        UNSET,
    )


def test_text_is_never_cut_inside_a_character() -> None:
    assert cap_result([TextContent("€" * 4)], UNSET, 10) == (
        [
            TextContent("€€€"),
            TextContent(
                "[truncated: the MCP server's result is 12 bytes, over the 10-byte limit; "
                "left out: 3 bytes of text]"
            ),
        ],
        UNSET,
    )


def test_a_text_block_past_the_cap_is_left_out_not_kept_empty() -> None:
    content = [TextContent("a" * 10), TextContent("b" * 5)]

    assert cap_result(content, UNSET, 10) == (
        [
            TextContent("a" * 10),
            TextContent(
                "[truncated: the MCP server's result is 15 bytes, over the 10-byte limit; "
                "left out: 5 bytes of text]"
            ),
        ],
        UNSET,
    )


def test_a_block_that_is_not_text_is_kept_or_left_out_whole() -> None:
    assert cap_result([IMAGE, LINK], UNSET, 60) == (
        [
            LINK,
            TextContent(
                "[truncated: the MCP server's result is 122 bytes, over the 60-byte limit; "
                "left out: the image block of 69 bytes]"
            ),
        ],
        UNSET,
    )


def test_structured_content_past_what_the_content_left_is_left_out() -> None:
    content = [TextContent("x" * 10)]

    assert cap_result(content, {"result": "x" * 10}, 20) == (
        [
            TextContent("x" * 10),
            TextContent(
                "[truncated: the MCP server's result is 33 bytes, over the 20-byte limit; "
                "left out: the structured content of 23 bytes]"
            ),
        ],
        UNSET,
    )


def test_nothing_after_the_cut_text_is_kept_even_if_it_would_fit() -> None:
    assert cap_result([TextContent("€" * 4), TextContent("x")], UNSET, 10) == (
        [
            TextContent("€€€"),
            TextContent(
                "[truncated: the MCP server's result is 13 bytes, over the 10-byte limit; "
                "left out: 4 bytes of text]"
            ),
        ],
        UNSET,
    )
