"""Opening beneath the session's directories in one step (`acp_server.agent.beneath`), with
`openat2(RESOLVE_BENEATH)` and with the `O_NOFOLLOW` walk that stands in for it: every test runs
with both (`strategy`), and a path leads out in neither."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_server.agent.beneath import MAX_LINKS, Escape, Roots, openat2


@pytest.fixture(params=["openat2", "walk"])
def strategy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(openat2, "usable", False)
    elif not openat2.usable:
        pytest.skip("this kernel has no openat2")
    return str(request.param)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """`w` (a root) holds `sub/f.txt`; `extra` (another root) holds `e.txt`; `outside` holds
    `secret.txt` and is no root."""
    base = tmp_path.resolve()
    for directory in ("w/sub", "extra", "outside"):
        (base / directory).mkdir(parents=True)
    (base / "w/sub/f.txt").write_text("inside\n")
    (base / "extra/e.txt").write_text("extra\n")
    (base / "outside/secret.txt").write_text("secret\n")
    return base


@pytest.fixture
def roots(tree: Path) -> Iterator[Roots]:
    with Roots([tree / "w", tree / "extra"]) as opened:
        yield opened


def read(roots: Roots, path: Path | str, **options: bool) -> tuple[str, str]:
    fd, where = roots.open(str(path), os.O_RDONLY | os.O_CLOEXEC, **options)
    with os.fdopen(fd) as stream:
        return stream.read(), where


def test_a_plain_path_is_opened_and_named(strategy: str, roots: Roots, tree: Path) -> None:
    assert read(roots, tree / "w/sub/f.txt") == ("inside\n", str(tree / "w/sub/f.txt"))


def test_a_relative_symlink_inside_is_followed(strategy: str, roots: Roots, tree: Path) -> None:
    (tree / "w/link.txt").symlink_to("sub/f.txt")
    assert read(roots, tree / "w/link.txt") == ("inside\n", str(tree / "w/sub/f.txt"))


def test_an_absolute_symlink_inside_is_followed(strategy: str, roots: Roots, tree: Path) -> None:
    (tree / "w/dir").symlink_to(tree / "w/sub")
    assert read(roots, tree / "w/dir/f.txt") == ("inside\n", str(tree / "w/sub/f.txt"))


def test_a_symlink_into_another_root_is_followed(strategy: str, roots: Roots, tree: Path) -> None:
    (tree / "w/to-extra").symlink_to("../extra")
    assert read(roots, tree / "w/to-extra/e.txt") == ("extra\n", str(tree / "extra/e.txt"))


def test_dot_dot_into_another_root_is_followed(strategy: str, roots: Roots, tree: Path) -> None:
    assert read(roots, tree / "w/../extra/e.txt")[0] == "extra\n"


@pytest.mark.parametrize(
    ("link", "path"),
    [("../outside", "w/out/secret.txt"), ("{tree}/outside", "w/out/secret.txt")],
)
def test_a_symlink_out_of_the_roots_escapes_naming_where_it_led(
    strategy: str, roots: Roots, tree: Path, link: str, path: str
) -> None:
    (tree / "w/out").symlink_to(link.format(tree=tree))
    with pytest.raises(Escape) as caught:
        roots.open(str(tree / path), os.O_RDONLY)
    assert caught.value.where == str(tree / "outside/secret.txt")


def test_dot_dot_out_of_the_roots_escapes(strategy: str, roots: Roots, tree: Path) -> None:
    with pytest.raises(Escape) as caught:
        roots.open(str(tree / "w/sub/../../outside/secret.txt"), os.O_RDONLY)
    assert caught.value.where == str(tree / "outside/secret.txt")


def test_a_symlink_loop_ends_in_eloop(strategy: str, roots: Roots, tree: Path) -> None:
    (tree / "w/loop").symlink_to(tree / "w/loop")
    with pytest.raises(OSError) as caught:
        roots.open(str(tree / "w/loop"), os.O_RDONLY)
    assert caught.value.errno == errno.ELOOP


def test_a_chain_of_max_links_is_followed_and_one_more_is_not(
    strategy: str, roots: Roots, tree: Path
) -> None:
    previous = "sub/f.txt"
    for index in range(MAX_LINKS + 1):
        (tree / f"w/l{index}").symlink_to(previous)
        previous = f"l{index}"
    assert read(roots, tree / f"w/l{MAX_LINKS - 1}")[0] == "inside\n"
    with pytest.raises(OSError) as caught:
        roots.open(str(tree / f"w/l{MAX_LINKS}"), os.O_RDONLY)
    assert caught.value.errno == errno.ELOOP


def test_follow_false_refuses_every_symlink(strategy: str, roots: Roots, tree: Path) -> None:
    (tree / "w/dir").symlink_to("sub")
    with pytest.raises(OSError) as caught:
        roots.open(str(tree / "w/dir/f.txt"), os.O_RDONLY, follow=False)
    assert caught.value.errno == errno.ELOOP


def test_a_directory_is_opened_without_following_symlinks(
    strategy: str, roots: Roots, tree: Path
) -> None:
    fd, where = roots.open(str(tree / "w/sub"), os.O_RDONLY | os.O_DIRECTORY, follow=False)
    try:
        assert (where, os.listdir(fd)) == (str(tree / "w/sub"), ["f.txt"])
    finally:
        os.close(fd)


def test_missing_parents_are_made_inside(strategy: str, roots: Roots, tree: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    fd, where = roots.open(str(tree / "w/a/b/new.txt"), flags, make_parents=True)
    os.close(fd)
    assert (where, (tree / "w/a/b/new.txt").is_file()) == (str(tree / "w/a/b/new.txt"), True)


def test_parents_are_not_made_through_a_symlink_out(
    strategy: str, roots: Roots, tree: Path
) -> None:
    (tree / "w/out").symlink_to("../outside")
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    with pytest.raises(Escape):
        roots.open(str(tree / "w/out/a/new.txt"), flags, make_parents=True)
    assert sorted(p.name for p in (tree / "outside").iterdir()) == ["secret.txt"]


def test_a_root_is_named_by_its_given_spelling_too(strategy: str, tree: Path) -> None:
    (tree / "alias").symlink_to("w")
    with Roots([tree / "alias"]) as roots:
        assert read(roots, tree / "alias/sub/f.txt") == ("inside\n", str(tree / "w/sub/f.txt"))


def test_resolve_keeps_a_missing_rest_as_spelled(strategy: str, roots: Roots, tree: Path) -> None:
    (tree / "w/dir").symlink_to("sub")
    assert roots.resolve(str(tree / "w/dir/new/x.txt")) == str(tree / "w/sub/new/x.txt")


def test_resolve_escapes_through_a_symlink_out(strategy: str, roots: Roots, tree: Path) -> None:
    (tree / "w/out").symlink_to(tree / "outside")
    with pytest.raises(Escape) as caught:
        roots.resolve(str(tree / "w/out/new.txt"))
    assert caught.value.where == str(tree / "outside/new.txt")
