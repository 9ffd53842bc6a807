"""`list_directory`, `glob` and `grep` (SPEC 4.3) called directly on small trees: confinement,
`.gitignore` (nested files, negation, ignored directories), binary files, caps and their notes,
context lines, case, and the newest-first order of `glob`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from acp_server.agent.confinement import PathRefused
from acp_server.agent.tools.arguments import parameters_schema
from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.edit import EditFileArgs
from acp_server.agent.tools.listing import ListDirectoryArgs, list_directory
from acp_server.agent.tools.search import GlobArgs, GrepArgs, glob, grep
from acp_server.agent.tools.tree import TreeLimits
from acp_server.core.acp_updates import ToolCallLocation


def make(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def globbed(root: Path, pattern: str, path: str = ".") -> list[str]:
    return glob(GlobArgs(pattern, path), root, []).raw_output["paths"]


def grep_text(root: Path, pattern: str, **options: Any) -> str:
    return grep(GrepArgs(pattern, **options), root, []).text


@pytest.fixture
def ignoring(tmp_path: Path) -> Path:
    """A tree whose `.gitignore` files ignore a directory, a suffix, and re-include one file."""
    return make(
        tmp_path,
        {
            ".gitignore": "build/\n*.log\n",
            "a.py": "hit\n",
            "x.log": "hit\n",
            "build/b.py": "hit\n",
            "src/keep.log": "hit\n",
            "src/c.py": "hit\n",
            "src/.gitignore": "!keep.log\nc.py\n",
            "src/deep/d.py": "hit\n",
            ".git/config": "hit\n",
        },
    )


# ---------------------------------------------------------------------------------------------
# .gitignore


def test_glob_leaves_out_ignored_files_and_directories_and_dot_git(ignoring: Path) -> None:
    assert sorted(globbed(ignoring, "**")) == [
        ".gitignore",
        "a.py",
        "src/.gitignore",
        "src/deep/d.py",
        "src/keep.log",
    ]


def test_a_nested_gitignore_applies_below_its_directory_only(tmp_path: Path) -> None:
    make(tmp_path, {"c.py": "", "src/c.py": "", "src/.gitignore": "c.py\n"})
    assert sorted(globbed(tmp_path, "**/*.py")) == ["c.py"]


def test_grep_skips_ignored_files_and_finds_the_reincluded_one(ignoring: Path) -> None:
    # A directory's files come before its subdirectories.
    assert grep_text(ignoring, "hit") == "a.py:1:hit\nsrc/keep.log:1:hit\nsrc/deep/d.py:1:hit"


def test_a_walk_started_below_the_root_still_honours_the_roots_gitignore(ignoring: Path) -> None:
    make(ignoring, {"src/deep/e.log": "hit\n"})
    assert globbed(ignoring, "*", "src/deep") == ["src/deep/d.py"]


def test_a_walk_started_inside_an_ignored_directory_searches_it(ignoring: Path) -> None:
    assert grep_text(ignoring, "hit", path="build") == "build/b.py:1:hit"


def test_list_directory_hides_ignored_entries_and_says_how_many(ignoring: Path) -> None:
    result = list_directory(ListDirectoryArgs("."), ignoring, [])
    assert result.text == (
        "[dir]  src/\n[file] .gitignore (13 bytes)\n[file] a.py (4 bytes)\n"
        "[2 ignored entries not shown]"
    )
    assert result.raw_output["entries"] == [
        {"name": "src", "type": "dir"},
        {"name": ".gitignore", "type": "file", "size": 13},
        {"name": "a.py", "type": "file", "size": 4},
    ]


def test_list_directory_applies_its_ignore_patterns_and_the_local_gitignore(
    ignoring: Path,
) -> None:
    result = list_directory(ListDirectoryArgs("src", ignore=["deep/"]), ignoring, [])
    assert result.text == (
        "[file] .gitignore (15 bytes)\n[file] keep.log (4 bytes)\n[2 ignored entries not shown]"
    )


def test_list_directory_shows_a_symlink_as_one_without_following_it(tmp_path: Path) -> None:
    os.symlink("/etc", tmp_path / "etc")
    assert list_directory(ListDirectoryArgs("."), tmp_path, []).text == "[symlink] etc"


def test_list_directory_of_a_file_is_an_error(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": ""})
    with pytest.raises(ToolError, match=r"^a\.txt is not a directory$"):
        list_directory(ListDirectoryArgs("a.txt"), tmp_path, [])


def test_list_directory_is_capped_with_a_note(tmp_path: Path) -> None:
    make(tmp_path, {f"f{n}": "" for n in range(5)})
    result = list_directory(ListDirectoryArgs("."), tmp_path, [], TreeLimits(list_entries=2))
    assert result.text == (
        "[file] f0 (0 bytes)\n[file] f1 (0 bytes)\n"
        "[capped: showing the first 2 of 5 entries; list a subdirectory, or use glob]"
    )
    assert result.truncated


# ---------------------------------------------------------------------------------------------
# Confinement


@pytest.fixture
def escapes(tmp_path: Path) -> tuple[Path, Path]:
    workspace, outside = tmp_path / "w", tmp_path / "outside"
    make(outside, {"secret.txt": "hit\n"})
    make(workspace, {"mine.txt": "hit\n"})
    os.symlink(outside, workspace / "link-dir")
    os.symlink(outside / "secret.txt", workspace / "link-file.txt")
    return workspace, outside


@pytest.mark.parametrize("path", ["..", "../outside", "{outside}", "link-dir"])
def test_every_tree_tool_refuses_a_path_outside_the_roots(
    escapes: tuple[Path, Path], path: str
) -> None:
    workspace, outside = escapes
    raw = path.format(outside=outside)
    for call in (
        lambda: list_directory(ListDirectoryArgs(raw), workspace, []),
        lambda: glob(GlobArgs("*", raw), workspace, []),
        lambda: grep(GrepArgs("hit", raw), workspace, []),
    ):
        with pytest.raises(PathRefused, match="is outside the session's directories"):
            call()


def test_walks_do_not_follow_symlinks_out_of_the_roots(escapes: tuple[Path, Path]) -> None:
    workspace, _ = escapes
    assert globbed(workspace, "**") == ["mine.txt"]
    assert grep_text(workspace, "hit") == "mine.txt:1:hit"


def test_a_symlinked_file_inside_the_roots_is_searched(tmp_path: Path) -> None:
    make(tmp_path, {"real.txt": "hit\n"})
    os.symlink(tmp_path / "real.txt", tmp_path / "alias.txt")
    assert grep_text(tmp_path, "hit") == "alias.txt:1:hit\nreal.txt:1:hit"


def test_an_additional_directory_is_searched_and_shown_absolute(tmp_path: Path) -> None:
    workspace, extra = tmp_path / "w", tmp_path / "extra"
    make(workspace, {})
    make(extra, {"e.txt": "hit\n"})
    result = grep(GrepArgs("hit", str(extra)), workspace, [extra])
    assert result.text == f"{extra}/e.txt:1:hit"


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"^nowhere does not exist$"):
        glob(GlobArgs("*", "nowhere"), tmp_path, [])


# ---------------------------------------------------------------------------------------------
# glob


def test_glob_lists_newest_first_then_by_path(tmp_path: Path) -> None:
    make(tmp_path, {"old.py": "", "new.py": "", "mid.py": "", "tie.py": ""})
    for name, mtime in (("old.py", 1000), ("new.py", 3000), ("mid.py", 2000), ("tie.py", 2000)):
        os.utime(tmp_path / name, (mtime, mtime))
    assert globbed(tmp_path, "*.py") == ["new.py", "mid.py", "tie.py", "old.py"]


def test_glob_star_stays_in_one_directory_and_double_star_spans_any(tmp_path: Path) -> None:
    make(tmp_path, {"a.py": "", "s/b.py": "", "s/t/c.py": "", "s/t/c.txt": ""})
    assert sorted(globbed(tmp_path, "*.py")) == ["a.py"]
    assert sorted(globbed(tmp_path, "s/*.py")) == ["s/b.py"]
    assert sorted(globbed(tmp_path, "**/*.py")) == ["a.py", "s/b.py", "s/t/c.py"]
    assert sorted(globbed(tmp_path, "s/**/c.{py,txt}")) == ["s/t/c.py", "s/t/c.txt"]


def test_glob_patterns_are_relative_to_path_and_results_to_cwd(tmp_path: Path) -> None:
    make(tmp_path, {"s/b.py": "", "s/t/c.py": ""})
    assert globbed(tmp_path, "*.py", "s") == ["s/b.py"]
    assert globbed(tmp_path, f"{tmp_path}/s/t/*.py", "s") == ["s/t/c.py"]


def test_glob_is_capped_with_a_note_counting_every_match(tmp_path: Path) -> None:
    make(tmp_path, {f"f{n}.py": "" for n in range(4)})
    for n in range(4):
        os.utime(tmp_path / f"f{n}.py", (n, n))
    result = glob(GlobArgs("*.py"), tmp_path, [], TreeLimits(glob_paths=2))
    assert result.text == (
        "f3.py\nf2.py\n[capped: showing the first 2 of 4 files, newest first; narrow the pattern]"
    )
    assert (result.truncated, result.raw_output["count"]) == (True, 4)


def test_glob_without_matches_says_so(tmp_path: Path) -> None:
    assert glob(GlobArgs("*.rs"), tmp_path, []).text == "No files match '*.rs' in .."


# ---------------------------------------------------------------------------------------------
# grep


def test_grep_reports_file_and_line_and_locations(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": "one\ntwo\nthree\n"})
    result = grep(GrepArgs("t[wh]"), tmp_path, [])
    assert result.text == "a.txt:2:two\na.txt:3:three"
    assert result.locations == [
        ToolCallLocation(f"{tmp_path}/a.txt", 2),
        ToolCallLocation(f"{tmp_path}/a.txt", 3),
    ]


def test_grep_skips_binary_files(tmp_path: Path) -> None:
    make(tmp_path, {"bin.dat": b"hit\x00\n", "text.txt": "hit\n"})
    assert grep_text(tmp_path, "hit") == "text.txt:1:hit"


def test_grep_skips_files_over_the_size_cap_and_says_so(tmp_path: Path) -> None:
    make(tmp_path, {"big.txt": "hit\n" * 10, "small.txt": "hit\n"})
    result = grep(GrepArgs("hit"), tmp_path, [], TreeLimits(file_bytes=8))
    assert result.text == "small.txt:1:hit\n[1 files over 8 bytes were not searched]"


def test_grep_ignore_case(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": "Hit\nhit\nHIT\nmiss\n"})
    assert grep_text(tmp_path, "hit") == "a.txt:2:hit"
    assert grep_text(tmp_path, "hit", ignore_case=True) == "a.txt:1:Hit\na.txt:2:hit\na.txt:3:HIT"


def test_grep_context_lines_merge_and_separate_groups(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": "1\nhit\n3\nhit\n5\n6\n7\nhit\n", "b.txt": "hit\n2\n"})
    assert grep_text(tmp_path, "hit", context_lines=1) == (
        "a.txt-1-1\na.txt:2:hit\na.txt-3-3\na.txt:4:hit\na.txt-5-5\n--\n"
        "a.txt-7-7\na.txt:8:hit\n--\nb.txt:1:hit\nb.txt-2-2"
    )


def test_grep_is_capped_at_max_results_with_a_note(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": "hit\nhit\n", "b.txt": "hit\n"})
    result = grep(GrepArgs("hit", max_results=2), tmp_path, [])
    assert result.text == (
        "a.txt:1:hit\na.txt:2:hit\n[capped: showing the first 2 matches; narrow the pattern "
        "or path, or raise maxResults]"
    )
    assert (result.truncated, len(result.locations)) == (True, 2)


def test_grep_exactly_at_max_results_is_not_capped(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": "hit\nhit\n", "b.txt": "miss\n"})
    assert not grep(GrepArgs("hit", max_results=2), tmp_path, []).truncated


def test_grep_glob_filter_matches_names_at_any_depth(tmp_path: Path) -> None:
    make(tmp_path, {"a.py": "hit\n", "s/b.py": "hit\n", "s/c.txt": "hit\n"})
    assert grep_text(tmp_path, "hit", glob="*.py") == "a.py:1:hit\ns/b.py:1:hit"
    assert grep_text(tmp_path, "hit", glob="s/*") == "s/b.py:1:hit\ns/c.txt:1:hit"


def test_grep_of_one_file(tmp_path: Path) -> None:
    make(tmp_path, {"s/a.txt": "x\nhit\n"})
    assert grep_text(tmp_path, "hit", path="s/a.txt") == "s/a.txt:2:hit"


def test_grep_clips_long_lines(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": "hit" + "x" * 20 + "\n"})
    result = grep(GrepArgs("hit"), tmp_path, [], TreeLimits(line_chars=5))
    assert result.text == "a.txt:1:hitxx [... 18 more characters]"


def test_grep_anchors_match_line_by_line_and_crlf_is_not_shown(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": b"no hit\r\nhit here\r\n"})
    assert grep_text(tmp_path, "^hit") == "a.txt:2:hit here"


def test_grep_without_matches_says_so(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": "x\n"})
    assert grep_text(tmp_path, "hit") == "No matches for 'hit' in .."


def test_a_bad_regular_expression_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as caught:
        grep(GrepArgs("(unclosed"), tmp_path, [])
    assert str(caught.value) == "invalid regular expression '(unclosed': missing ): (unclosed"


def test_grep_arguments_are_camel_case_with_bounds() -> None:
    decoded = msgspec.json.decode(
        b'{"pattern":"x","ignoreCase":true,"contextLines":2,"maxResults":5,"glob":"*.py"}',
        type=GrepArgs,
    )
    assert decoded == GrepArgs("x", ".", "*.py", True, 2, 5)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"pattern":"x","maxResults":0}', type=GrepArgs)


def test_the_schemas_the_model_sees_come_from_the_structs() -> None:
    schemas = {
        args_type.__name__: parameters_schema(args_type)
        for args_type in (EditFileArgs, ListDirectoryArgs, GlobArgs, GrepArgs)
    }
    assert {
        name: (list(schema["properties"]), schema["required"]) for name, schema in schemas.items()
    } == {
        "EditFileArgs": (
            ["path", "oldText", "newText", "replaceAll"],
            ["path", "oldText", "newText"],
        ),
        "ListDirectoryArgs": (["path", "ignore"], ["path"]),
        "GlobArgs": (["pattern", "path"], ["pattern"]),
        "GrepArgs": (
            ["pattern", "path", "glob", "ignoreCase", "contextLines", "maxResults"],
            ["pattern"],
        ),
    }
    assert all(schema["additionalProperties"] is False for schema in schemas.values())


def test_grep_refuses_a_fifo_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ToolError) as caught:
        grep(GrepArgs("hit", "pipe"), tmp_path, [])
    assert str(caught.value) == (
        "refused: pipe is a FIFO (named pipe), not a regular file or a directory"
    )


def test_an_absolute_glob_pattern_outside_path_is_an_error(tmp_path: Path) -> None:
    make(tmp_path, {"s/a.py": ""})
    with pytest.raises(ToolError) as caught:
        glob(GlobArgs("/etc/*.conf", "s"), tmp_path, [])
    assert str(caught.value) == (
        "the pattern '/etc/*.conf' is absolute but not below s: give the directory as `path` "
        "and a pattern relative to it"
    )


def test_grep_end_anchors_match_at_the_end_of_crlf_lines(tmp_path: Path) -> None:
    make(tmp_path, {"a.txt": b"a hit\r\nhit b\r\n"})
    assert grep_text(tmp_path, "hit$") == "a.txt:1:a hit"


@pytest.mark.parametrize("tool", ["glob", "grep"])
def test_a_glob_that_makes_no_valid_expression_is_a_clear_error(tmp_path: Path, tool: str) -> None:
    make(tmp_path, {"a.txt": "x\n"})
    with pytest.raises(ToolError) as caught:
        if tool == "glob":
            glob(GlobArgs("[z-a].txt"), tmp_path, [])
        else:
            grep(GrepArgs("x", glob="[z-a].txt"), tmp_path, [])
    assert str(caught.value) == (
        "invalid glob pattern '[z-a].txt': invalid character class range: z-a"
    )
