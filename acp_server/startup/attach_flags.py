"""`acp-server attach`'s reading of the serve flags: which shared server a command line means.

A shared server is keyed by its complete, normalised set of serve flags: the same flags reach
the same server, any other set starts another. The relay cannot import `cli.serve_flags` (it
imports msgspec, through `core`), so `SERVE_FLAGS` is a static table of the serve parser's flags
(`tests/test_attach_flags.py` holds it to the parser's actions exactly). Normalising reads the
flags as argparse would (`--flag value`, `--flag=value`, unambiguous prefixes, the last of a
repeated flag), fills in the defaults, folds in the environment's fallbacks as `serve` reads
them (`$ACP_SERVER_STORE`, `$ACP_SERVER_STORE_READ`, `$ACP_SERVER_SESSIONS_DIR`,
`$ACP_REPLAY_FILE`) and makes relative
paths absolute against the relay's directory: the server runs elsewhere (`attach.SERVER_CWD`).

What cannot be read (an unknown flag, a flag without its value) is kept as given, in order, and
passed on: the server refuses it in its own words. Standard library only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # `typing` costs milliseconds of every relay's start
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Final

PATH: Final = "path"
"""A value naming a file or directory: made absolute."""
VALUE: Final = "value"
"""Any other value, kept as given."""
SWITCH: Final = "switch"
"""A flag without a value (`store_true`)."""
REPEATED: Final = "repeated"
"""A flag that may be given many times (`append`): their order is irrelevant."""

SERVE_FLAGS: Final[dict[str, tuple[str, str | None]]] = {
    "--sessions-dir": (PATH, None),
    "--store": (VALUE, None),
    "--store-read": (VALUE, None),
    "--store-retry": (VALUE, "30.0"),
    "--replay": (PATH, None),
    "--replay-override": (PATH, None),
    "--pace-ms": (VALUE, "0"),
    "--max-steps": (VALUE, "50"),
    "--compression": (VALUE, "none"),
    "--no-pack": (SWITCH, None),
    "--log-level": (VALUE, "warning"),
    "--max-line-bytes": (VALUE, "67108864"),
    "--mcp-timeout": (VALUE, "60.0"),
    "--mcp-connect-timeout": (VALUE, "10.0"),
    "--detached-permission-timeout": (VALUE, "600.0"),
    "--mode": (VALUE, "default"),
    "--titles": (VALUE, None),
    "--context-window": (VALUE, None),
    "--compact-at": (VALUE, "0.8"),
    "--price-input": (VALUE, None),
    "--price-output": (VALUE, None),
    "--system-prompt-file": (PATH, None),
    "--listen": (VALUE, None),
    "--socket": (PATH, None),
    "--token-file": (PATH, None),
    "--allow-origin": (REPEATED, None),
    "--max-pending-requests": (VALUE, "64"),
    "--provider": (VALUE, "llm-replay"),
    "--model": (VALUE, None),
    "--models": (VALUE, None),
    "--reasoning": (VALUE, None),
    "--base-url": (VALUE, None),
    "--api-key-env": (VALUE, None),
    "--max-tokens": (VALUE, None),
    "--thinking-budget": (VALUE, None),
    "--connect-timeout": (VALUE, None),
    "--read-timeout": (VALUE, None),
    "--max-retries": (VALUE, None),
}
"""Every flag of `acp-server serve`: its kind and its default as argparse shows it (None: no
value)."""

INTERNAL_FLAGS: Final = frozenset({"--socket"})
"""Serve flags the relay sets itself: given to `attach`, they are refused."""

STORE_ENV: Final = "ACP_SERVER_STORE"
STORE_READ_ENV: Final = "ACP_SERVER_STORE_READ"
SESSIONS_DIR_ENV: Final = "ACP_SERVER_SESSIONS_DIR"
REPLAY_FILE_ENV: Final = "ACP_REPLAY_FILE"
REPLAY: Final = "llm-replay"
STORE_SCHEMES: Final = frozenset({"file", "sqlite", "postgresql", "postgres"})
"""The store URL schemes (`storage.engines.ENGINES`, mirrored: `tests/test_attach_flags.py`
holds this copy to it). A `--store` that starts with one of them and a colon is a URL, whole or
one the server refuses (`sqlite:a.db`), never a directory to make absolute."""


class Flags:
    """A command line's serve flags, normalised."""

    __slots__ = ("unread", "values")

    def __init__(
        self, values: dict[str, str | bool | tuple[str, ...] | None], unread: tuple[str, ...]
    ) -> None:
        self.values = values
        """Every flag of `SERVE_FLAGS` but the internal ones, to its value or its default."""
        self.unread = unread
        """The arguments that could not be read, in order: the server reports them."""

    def key_text(self) -> str:
        """The canonical text the server's key is made of."""
        parts = [f"{flag}={value!r}" for flag, value in sorted(self.values.items())]
        return "\n".join([*parts, *(f"?{arg!r}" for arg in self.unread)])

    def argv(self) -> list[str]:
        """The serve command line of these flags: each one that differs from its default."""
        argv: list[str] = []
        for flag, value in self.values.items():
            kind, default = SERVE_FLAGS[flag]
            if kind == SWITCH:
                argv += [flag] if value else []
            elif kind == REPEATED:
                assert isinstance(value, tuple)
                for one in value:
                    argv += [flag, one]
            elif value is not None and value != default:
                assert isinstance(value, str)
                argv += [flag, value]
        return [*argv, *self.unread]


def resolve(name: str) -> str | None:
    """The serve flag `name` is, as argparse reads it (the flag, or an unambiguous prefix)."""
    if name in SERVE_FLAGS:
        return name
    if not name.startswith("--") or len(name) <= 2:
        return None
    matches = [flag for flag in SERVE_FLAGS if flag.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def normalise(args: Sequence[str], environ: Mapping[str, str], cwd: str) -> Flags:
    """The serve flags `args` give, normalised (see the module's note)."""
    given: dict[str, str | bool | list[str]] = {}
    unread: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        name, equals, value = arg.partition("=")
        flag = resolve(name) if name.startswith("--") else None
        if flag is None or flag in INTERNAL_FLAGS:
            unread.append(arg)
            continue
        kind = SERVE_FLAGS[flag][0]
        if kind == SWITCH:
            if equals:
                unread.append(arg)
            else:
                given[flag] = True
            continue
        if not equals:
            if index >= len(args):
                unread.append(arg)
                continue
            value = args[index]
            index += 1
        if kind == PATH and value:
            value = absolute(value, cwd)
        if kind == REPEATED:
            previous = given.get(flag, [])
            assert isinstance(previous, list)
            given[flag] = [*previous, value]
        else:
            given[flag] = value
    _fold_environment(given, environ, cwd)
    values: dict[str, str | bool | tuple[str, ...] | None] = {}
    for flag, (kind, default) in SERVE_FLAGS.items():
        if flag in INTERNAL_FLAGS:
            continue
        found = given.get(flag)
        if kind == SWITCH:
            values[flag] = bool(found)
        elif kind == REPEATED:
            values[flag] = tuple(sorted(set(found))) if isinstance(found, list) else ()
        else:
            values[flag] = found if isinstance(found, str) else default
    return Flags(values, tuple(unread))


def _fold_environment(
    given: dict[str, str | bool | list[str]], environ: Mapping[str, str], cwd: str
) -> None:
    """The environment's fallbacks, as flags: the server reads the same store and fixture."""
    if "--store" not in given and "--sessions-dir" not in given:
        if environ.get(STORE_ENV):
            given["--store"] = environ[STORE_ENV]
        elif environ.get(SESSIONS_DIR_ENV):
            given["--sessions-dir"] = absolute(environ[SESSIONS_DIR_ENV], cwd)
    if "--store-read" not in given and environ.get(STORE_READ_ENV):
        given["--store-read"] = environ[STORE_READ_ENV]
    store = given.get("--store")
    if isinstance(store, str) and store and "://" not in store and not _a_store_url(store):
        given["--store"] = absolute(store, cwd)  # a directory, as `--sessions-dir` names one
    provider = given.get("--provider", REPLAY)
    if "--replay" not in given and provider == REPLAY and environ.get(REPLAY_FILE_ENV):
        given["--replay"] = absolute(environ[REPLAY_FILE_ENV], cwd)


def _a_store_url(store: str) -> bool:
    """Whether `store` names a store URL's scheme (`sqlite:a.db` included): not a directory."""
    scheme, colon, _ = store.partition(":")
    return bool(colon) and scheme.lower() in STORE_SCHEMES


def absolute(path: str, cwd: str) -> str:
    """`path` made absolute against `cwd`, `.` and `..` resolved as text (no symlink is read:
    the file may not exist yet)."""
    return os.path.normpath(os.path.join(cwd, path))
