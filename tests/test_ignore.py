"""`.gitignore` rules (`acp_server.agent.tools.ignore`): layers, negation, bad lines, the
prefilter that must never change pathspec's answer, and how a walk reads `.gitignore` files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from pathspec import GitIgnoreSpec

from acp_server.agent.tools.ignore import GITIGNORE, GITIGNORE_MAX_BYTES, IgnoreRules
from acp_server.agent.tools.listing import ListDirectoryArgs, list_directory
from acp_server.agent.tools.search import GlobArgs, glob
from acp_server.core.line_regex import PathRegex

PATTERNS = [
    "*.log",
    "!keep.log",
    "build/",
    "/dist",
    "a/**/b",
    "**/tmp",
    "*.py[cod]",
    "?.txt",
    "a/b/",
    "\\#x",
    "!a/**",
    "[!k]*.log",
    "# a comment",
    "",
]
SEGMENTS = ["a", "b", "build", "dist", "tmp", "keep.log", "x.log", "k.txt", "m.pyc", "#x"]


@given(
    patterns=st.lists(st.sampled_from(PATTERNS), max_size=6),
    segments=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4),
    is_dir=st.booleans(),
)
def test_one_layer_answers_as_pathspec_does(
    patterns: list[str], segments: list[str], is_dir: bool
) -> None:
    path = "/".join(segments)
    expected = GitIgnoreSpec.from_lines(patterns).match_file(path + "/" if is_dir else path)
    assert IgnoreRules().with_patterns("", patterns).ignored(path, is_dir) is expected


def test_a_deeper_layer_overrides_a_shallower_one() -> None:
    rules = IgnoreRules().with_patterns("", ["*.log"]).with_patterns("src", ["!keep.log"])
    assert [rules.ignored(path, False) for path in ("keep.log", "src/keep.log", "src/x.log")] == [
        True,
        False,
        True,
    ]


def test_a_layer_applies_only_below_its_directory() -> None:
    rules = IgnoreRules().with_patterns("src", ["/c.py"])
    assert [rules.ignored(path, False) for path in ("c.py", "src/c.py", "src/s/c.py")] == [
        False,
        True,
        False,
    ]


def test_lines_that_are_not_valid_patterns_are_skipped_like_git_does() -> None:
    rules = IgnoreRules().with_patterns("", ["\\", "[z-a]", "*.log"])
    assert (rules.ignored("x.log", False), rules.ignored("z", False)) == (True, False)


def test_no_patterns_add_no_layer() -> None:
    assert IgnoreRules().with_patterns("", ["# only a comment", ""]).layers == ()


def test_a_catastrophic_rule_is_matched_in_linear_time() -> None:
    # As a Python expression, `[^/]*a` six times then `[^/]*b` backtracks for about ten seconds
    # against a name of 80 `a`s, holding the GIL; a repository chooses both.
    # Its prefilter is therefore RE2's, as pathspec's own matcher is.
    rules = IgnoreRules().with_patterns("", ["*a" * 6 + "*b"])
    assert [type(layer.prefilter) for layer in rules.layers] == [PathRegex]
    assert rules.ignored("a" * 80, False) is False
    assert rules.ignored("a" * 80 + "b", False) is True


# ---------------------------------------------------------------------------------------------
# Reading `.gitignore` files that are not what they seem: the tools read them as regular files
# only, never through a symlink, never waiting on a FIFO, and bounded. `list_directory` reads
# the listed directory's own; a walk started below a root reads those of the directories above.


def listed(directory: Path) -> list[str]:
    entries = list_directory(ListDirectoryArgs("."), directory, []).raw_output["entries"]
    return [entry["name"] for entry in entries]


def globbed_below(root: Path, below: str) -> list[str]:
    return sorted(glob(GlobArgs("**", below), root, []).raw_output["paths"])


def test_a_gitignore_symlinked_out_of_the_cwd_is_not_applied(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "w", tmp_path / "outside"
    (workspace / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "rules").write_text("*.py\n")
    (workspace / "sub" / "a.py").write_text("")
    (workspace / GITIGNORE).symlink_to(outside / "rules")
    assert (listed(workspace), globbed_below(workspace, "sub")) == (
        ["sub", ".gitignore"],
        ["sub/a.py"],
    )


def test_a_gitignore_symlinked_inside_the_cwd_is_not_followed_either(tmp_path: Path) -> None:
    (tmp_path / "rules").write_text("*.py\n")
    (tmp_path / "a.py").write_text("")
    (tmp_path / GITIGNORE).symlink_to(tmp_path / "rules")
    assert listed(tmp_path) == [".gitignore", "a.py", "rules"]


def test_a_gitignore_symlinked_to_dev_zero_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text("")
    (tmp_path / GITIGNORE).symlink_to("/dev/zero")
    assert (listed(tmp_path), globbed_below(tmp_path, "sub")) == (
        ["sub", ".gitignore"],
        ["sub/a.py"],
    )


def test_a_gitignore_that_is_a_fifo_is_skipped_without_waiting_for_a_writer(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("")
    fifo = tmp_path / GITIGNORE
    os.mkfifo(fifo)
    found: list[list[str]] = []
    walk = threading.Thread(target=lambda: found.append(listed(tmp_path)), daemon=True)
    walk.start()
    walk.join(timeout=10)
    blocked = walk.is_alive()
    if blocked:  # let a reader stuck on the FIFO see its end, so the thread can finish
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        walk.join()
    assert (blocked, found) == (False, [[".gitignore", "a.py"]])


def test_a_gitignore_over_the_size_cap_is_skipped_whole(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    with open(tmp_path / GITIGNORE, "wb") as stream:
        stream.write(b"*.py\n")
        stream.truncate(GITIGNORE_MAX_BYTES + 1)
    assert listed(tmp_path) == [".gitignore", "a.py"]


def test_a_gitignore_at_the_size_cap_is_applied(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    (tmp_path / GITIGNORE).write_bytes(b"*.py\n".ljust(GITIGNORE_MAX_BYTES, b"\n"))
    assert listed(tmp_path) == [".gitignore"]
