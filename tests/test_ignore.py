"""`.gitignore` rules (`acp_server.agent.tools.ignore`): layers, negation, bad lines, and the
prefilter that must never change pathspec's answer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pathspec import GitIgnoreSpec

from acp_server.agent.tools.ignore import IgnoreRules

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
