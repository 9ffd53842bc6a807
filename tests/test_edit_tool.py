"""`edit_file` (SPEC 4.3): exact replacement, the errors for zero or several matches, the diff,
the changed lines, and the confined local read (`acp_server.agent.tools.edit`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.confinement import PathRefused
from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.edit import (
    Edit,
    EditFileArgs,
    apply_edit,
    edit_content,
    edit_locations,
    match_lines,
    prepare_local_edit,
    write_local_edit,
)
from acp_server.core.acp_updates import ToolCallLocation
from acp_server.core.content import DiffContent, TextContent

TEXT = "alpha\nbeta\ngamma\nbeta\ndelta\n"


def edit(old: str, new: str, replace_all: bool = False) -> EditFileArgs:
    return EditFileArgs("f.txt", old, new, replace_all)


def test_a_unique_match_is_replaced_and_its_line_reported() -> None:
    assert apply_edit(TEXT, edit("gamma", "GAMMA"), "f.txt") == Edit(
        "alpha\nbeta\nGAMMA\nbeta\ndelta\n", [3]
    )


def test_several_matches_without_replace_all_are_an_error_naming_count_and_lines() -> None:
    with pytest.raises(ToolError) as caught:
        apply_edit(TEXT, edit("beta", "BETA"), "f.txt")
    assert str(caught.value) == (
        "oldText occurs 2 times in f.txt (lines 2, 4): include more surrounding text to make "
        "it unique, or set replaceAll to replace every occurrence"
    )


def test_no_match_is_an_error() -> None:
    with pytest.raises(ToolError) as caught:
        apply_edit(TEXT, edit("epsilon", "x"), "f.txt")
    assert str(caught.value) == (
        "oldText was not found in f.txt: it must match the file exactly, whitespace and line "
        "breaks included (read the file again to see its current text)"
    )


def test_identical_old_and_new_text_is_an_error() -> None:
    with pytest.raises(ToolError) as caught:
        apply_edit(TEXT, edit("beta", "beta"), "f.txt")
    assert str(caught.value) == "oldText and newText are the same: nothing to change in f.txt"


def test_replace_all_replaces_every_match_and_reports_where_each_landed() -> None:
    # The first replacement adds a line, so the second lands one line further down.
    result = apply_edit(TEXT, edit("beta", "b1\nb2", replace_all=True), "f.txt")
    assert result == Edit("alpha\nb1\nb2\ngamma\nb1\nb2\ndelta\n", [2, 5])
    assert result.count == 2


def test_the_error_lists_at_most_twenty_lines() -> None:
    with pytest.raises(ToolError) as caught:
        apply_edit("x\n" * 25, edit("x", "y"), "f.txt")
    lines = ", ".join(str(n) for n in range(1, 21))
    assert f"(lines {lines} and 5 more)" in str(caught.value)


def test_matches_are_counted_left_to_right_without_overlap() -> None:
    assert match_lines("aaaa\naa", "aa") == [1, 1, 2]


def test_old_text_may_span_lines() -> None:
    assert apply_edit(TEXT, edit("beta\ngamma\n", ""), "f.txt") == Edit("alpha\nbeta\ndelta\n", [2])


def test_the_content_is_a_summary_and_a_diff_of_the_whole_file() -> None:
    result = apply_edit(TEXT, edit("gamma", "GAMMA"), "/w/f.txt")
    assert edit_content("/w/f.txt", TEXT, result) == [
        TextContent("Edited /w/f.txt: 1 replacement (line 3)."),
        DiffContent(path="/w/f.txt", new_text="alpha\nbeta\nGAMMA\nbeta\ndelta\n", old_text=TEXT),
    ]
    assert edit_locations("/w/f.txt", result) == [ToolCallLocation("/w/f.txt", 3)]


def test_arguments_are_camel_case_and_old_text_may_not_be_empty() -> None:
    decoded = msgspec.json.decode(
        b'{"path":"a","oldText":"x","newText":"y","replaceAll":true}', type=EditFileArgs
    )
    assert decoded == EditFileArgs("a", "x", "y", True)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"path":"a","oldText":"","newText":"y"}', type=EditFileArgs)


@given(
    before=st.text(max_size=40),
    old=st.text(min_size=1, max_size=5),
    new=st.text(max_size=5),
    after=st.text(max_size=40),
)
def test_an_applied_edit_contains_the_new_text_and_counts_as_str_count(
    before: str, old: str, new: str, after: str
) -> None:
    text = before + old + after
    count = text.count(old)
    args = EditFileArgs("f", old, new, replace_all=True)
    if old == new:
        return
    result = apply_edit(text, args, "f")
    assert result.count == count == len(match_lines(text, old))
    assert result.text == text.replace(old, new)
    # Independently of `match_lines`: where each copy of newText must be, and its line.
    starts = [m.start() for m in re.finditer(re.escape(old), text)]
    for index, start in enumerate(starts):
        position = start + index * (len(new) - len(old))
        assert result.text[position : position + len(new)] == new
        assert result.lines[index] == result.text.count("\n", 0, position) + 1
    if count > 1:
        with pytest.raises(ToolError, match=f"occurs {count} times"):
            apply_edit(text, EditFileArgs("f", old, new), "f")


# ---------------------------------------------------------------------------------------------
# On the local file system


def test_a_local_edit_is_prepared_without_writing_then_written(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text(TEXT)
    prepared = prepare_local_edit(edit("gamma", "GAMMA"), tmp_path, [], 1 << 20)
    assert (tmp_path / "f.txt").read_text() == TEXT
    assert (prepared.shown, prepared.old_text, prepared.edit.lines) == (
        tmp_path / "f.txt",
        TEXT,
        [3],
    )
    write_local_edit(prepared, "f.txt")
    assert (tmp_path / "f.txt").read_text() == "alpha\nbeta\nGAMMA\nbeta\ndelta\n"


def test_a_missing_file_cannot_be_edited(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as caught:
        prepare_local_edit(edit("a", "b"), tmp_path, [], 1 << 20)
    assert str(caught.value) == (
        "f.txt does not exist: edit_file changes an existing file (write_file creates one)"
    )


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(ToolError) as caught:
        prepare_local_edit(edit("caf", "x"), tmp_path, [], 1 << 20)
    assert str(caught.value) == "refused: f.txt is not UTF-8 text, which edit_file would corrupt"


@pytest.mark.parametrize("escape", ["../outside/f.txt", "{outside}/f.txt", "link/f.txt"])
def test_local_edits_outside_the_roots_are_refused(tmp_path: Path, escape: str) -> None:
    workspace, outside = tmp_path / "w", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "f.txt").write_text("a\n")
    os.symlink(outside, workspace / "link")
    args = EditFileArgs(escape.format(outside=outside), "a", "b")
    with pytest.raises(PathRefused, match="outside the session's directories"):
        prepare_local_edit(args, workspace, [], 1 << 20)
    assert (outside / "f.txt").read_text() == "a\n"


# ---------------------------------------------------------------------------------------------
# A file changed between the read (before the permission question) and the write (after it)


def test_a_line_added_after_the_edit_was_prepared_is_kept(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text(TEXT)
    prepared = prepare_local_edit(edit("gamma", "GAMMA"), tmp_path, [], 1 << 20)
    with open(tmp_path / "f.txt", "a") as stream:
        stream.write("added meanwhile\n")
    written = write_local_edit(prepared, "f.txt")
    assert (tmp_path / "f.txt").read_text() == "alpha\nbeta\nGAMMA\nbeta\ndelta\nadded meanwhile\n"
    assert written == (
        TEXT + "added meanwhile\n",
        Edit(TEXT.replace("gamma", "GAMMA") + "added meanwhile\n", [3]),
    )


def test_an_edit_that_no_longer_applies_after_a_change_is_refused_writing_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "f.txt").write_text(TEXT)
    prepared = prepare_local_edit(edit("gamma", "GAMMA"), tmp_path, [], 1 << 20)
    (tmp_path / "f.txt").write_text("alpha\nbeta\n")
    with pytest.raises(ToolError) as caught:
        write_local_edit(prepared, "f.txt")
    assert (str(caught.value), (tmp_path / "f.txt").read_text()) == (
        f"{tmp_path / 'f.txt'} changed since it was read, and the edit no longer applies: "
        f"oldText was not found in {tmp_path / 'f.txt'}: it must match the file exactly, "
        "whitespace and line breaks included (read the file again to see its current text). "
        "Nothing was written.",
        "alpha\nbeta\n",
    )


def test_an_edit_whose_file_was_removed_meanwhile_is_refused_writing_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "f.txt").write_text(TEXT)
    prepared = prepare_local_edit(edit("gamma", "GAMMA"), tmp_path, [], 1 << 20)
    (tmp_path / "f.txt").unlink()
    with pytest.raises(ToolError) as caught:
        write_local_edit(prepared, "f.txt")
    assert (str(caught.value), (tmp_path / "f.txt").exists()) == (
        f"{tmp_path / 'f.txt'} changed since it was read: it no longer exists. "
        "Nothing was written.",
        False,
    )
