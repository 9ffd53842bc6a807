"""The `acp-server` command line (SPEC 8).

Parsing only; each subcommand lives in its own module and is imported when chosen, so that
`acp-server serve` starts without loading what it does not use. `serve` is the default: a bare
`acp-server`, or one whose first argument is a flag, serves. Bad flags and unusable paths exit
with status 2 and one line on stderr (argparse's own behaviour, kept to one line).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeAlias

from . import __version__
from .core.compaction import DEFAULT_COMPACT_AT
from .core.modes import MODE_IDS, REASONING_LEVELS
from .providers.registry import LIVE_PROVIDERS, PROVIDER_NAMES, REPLAY, live_provider

if TYPE_CHECKING:
    from .providers.secret import Secret

COMMANDS = ("serve", "demo", "log", "store", "fixture", "login", "logout")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one clear line, status 2, no usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


def _path(text: str) -> Path:
    """A path argument; an empty one is refused (`Path("")` would quietly mean `.`)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text)


def _compact_share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT` for an IPv6 address; `:PORT` or a bare port: 127.0.0.1)."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {port}")
    return host, port


def _origin(text: str) -> str:
    from urllib.parse import urlsplit

    url = urlsplit(text.strip())
    if url.scheme not in ("http", "https") or not url.netloc or url.path not in ("", "/"):
        raise argparse.ArgumentTypeError(
            f"an origin is scheme://host[:port], like https://example.com, got {text!r}"
        )
    return f"{url.scheme}://{url.netloc}".lower()


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got {text!r}")
    return value


def _names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"an empty model name in {text!r}")
    return names


def _log_level(text: str) -> str:
    level = text.lower()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r} (choose from {', '.join(LOG_LEVELS)})"
        )
    return level


_Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"
"""Where each command's parser is added."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with `command`, one of `COMMAND_NAMES`, only that command's
    parser is made beside the top level's. A command line that names its command needs no
    other, and making the others' took a few milliseconds of every start."""
    parser = _Parser(
        prog="acp-server",
        description="An Agent Client Protocol agent over stdio, with lossless session logs. "
        "With no command, or flags only, it serves (see `acp-server serve --help`).",
    )
    parser.add_argument("--version", action="version", version=f"acp-server {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, add in _COMMANDS.items():
        if command is None or name == command:
            add(commands)
    return parser


def _add_serve(commands: _Commands) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve ACP over stdio (the default)",
        description="Serve the Agent Client Protocol over stdin/stdout: one JSON-RPC message per "
        "line. Protocol frames only on stdout; logs on stderr. Exits 0 at end of input.",
    )
    serve.add_argument(
        "--sessions-dir",
        metavar="DIR",
        type=_path,
        help="root of the session logs (default: $ACP_SERVER_SESSIONS_DIR, else sessions/ in "
        "the platform's user data directory)",
    )
    serve.add_argument(
        "--store",
        metavar="URL",
        help="where the sessions are kept: a directory or file:///abs/dir (JSONL logs), "
        "sqlite:///abs/path.db (one SQLite database) (default: $ACP_SERVER_STORE, else the "
        "--sessions-dir logs)",
    )
    serve.add_argument(
        "--replay",
        metavar="FIXTURE",
        type=_path,
        help="recorded session to replay as the model: a session.jsonl or a scenario directory "
        "(default: $ACP_REPLAY_FILE, else the bundled demo recording)",
    )
    serve.add_argument(
        "--replay-override",
        metavar="FILE",
        type=_path,
        help="a replay.override.json to use instead of the one beside the fixture",
    )
    serve.add_argument(
        "--pace-ms",
        metavar="N",
        type=_non_negative_int,
        default=0,
        help="delay each replayed chunk by N ms (default 0)",
    )
    serve.add_argument(
        "--max-steps",
        metavar="N",
        type=_positive_int,
        default=50,
        help="model calls allowed per turn (default 50)",
    )
    serve.add_argument(
        "--compression",
        choices=("none", "zstd"),
        default="none",
        help="write new logs as plain JSONL (none, the default) or as Zstandard frames (zstd)",
    )
    serve.add_argument(
        "--no-pack",
        action="store_true",
        help="write one event per line instead of packed chunk rows (diagnostics)",
    )
    serve.add_argument(
        "--log-level",
        metavar="LEVEL",
        type=_log_level,
        default="warning",
        help=f"stderr log level: {', '.join(LOG_LEVELS)} (default warning)",
    )
    serve.add_argument(
        "--max-line-bytes",
        metavar="N",
        type=_positive_int,
        default=64 * 1024 * 1024,
        help="longest accepted input line; a longer one is answered with an error and skipped "
        "(default 67108864, 64 MiB)",
    )
    serve.add_argument(
        "--mcp-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=60.0,
        help="how long an MCP tool call may take before it is an error result (default 60)",
    )
    serve.add_argument(
        "--mcp-connect-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=10.0,
        help="how long a session's MCP servers get to connect; a server not connected by "
        "then is left out of the session (default 10)",
    )
    serve.add_argument(
        "--mode",
        choices=MODE_IDS,
        default="default",
        help="the mode of new sessions: default (asks before writes, edits and commands), "
        "accept-edits (edits go ahead, commands ask), plan (writes, edits and commands are "
        "refused) or full-access (nothing asks); sessions switch with session/set_mode or /mode",
    )
    serve.add_argument(
        "--context-window",
        metavar="TOKENS",
        type=_positive_int,
        help="the model's context window for usage_update (default: known models' own, else "
        "128000)",
    )
    serve.add_argument(
        "--compact-at",
        metavar="SHARE",
        type=_compact_share,
        default=DEFAULT_COMPACT_AT,
        help="compact the conversation before a model call when the last usage reached this "
        "share of the context window (default 0.8; 0 never compacts by itself)",
    )
    serve.add_argument(
        "--price-input",
        metavar="USD",
        type=_price,
        help="USD per million input tokens; with --price-output, usage_update carries the cost",
    )
    serve.add_argument(
        "--price-output",
        metavar="USD",
        type=_price,
        help="USD per million output tokens",
    )
    network = serve.add_argument_group(
        "network (SPEC 3.4)",
        "Serve the same JSON-RPC over WebSocket, with the session viewer in a browser.",
    )
    network.add_argument(
        "--listen",
        metavar="HOST:PORT",
        type=_listen_address,
        help="serve over WebSocket at ws://HOST:PORT/acp (and the viewer at http://HOST:PORT/) "
        "instead of stdio, until SIGTERM or SIGINT; a bare PORT listens on 127.0.0.1; port 0 "
        "picks a free one",
    )
    network.add_argument(
        "--token-file",
        metavar="FILE",
        type=_path,
        help="read the bearer token clients must show from FILE (default: a new token, "
        "printed to stderr at start)",
    )
    network.add_argument(
        "--allow-origin",
        metavar="ORIGIN",
        type=_origin,
        action="append",
        default=[],
        help="let pages of ORIGIN (scheme://host[:port]) open the WebSocket, besides the "
        "server's own; may be repeated",
    )
    network.add_argument(
        "--max-pending-requests",
        metavar="N",
        type=_positive_int,
        default=64,
        help="requests one connection may have in flight; one more is refused (default 64)",
    )
    model = serve.add_argument_group(
        "live model (--provider " + " or ".join(LIVE_PROVIDERS) + ")",
        "; ".join(f"{p.name}: {p.summary}" for p in LIVE_PROVIDERS.values())
        + ". The API key is read from an environment variable only, never from a flag.",
    )
    model.add_argument(
        "--provider",
        choices=PROVIDER_NAMES,
        default=REPLAY,
        help="the model: llm-replay (recorded fixtures, the default) or a live endpoint ("
        + ", ".join(LIVE_PROVIDERS)
        + ")",
    )
    model.add_argument(
        "--model",
        metavar="NAME",
        help="the model name to request (required with a live provider)",
    )
    model.add_argument(
        "--models",
        metavar="NAMES",
        type=_names,
        help="more model names, comma-separated, that a session may switch to beside --model",
    )
    model.add_argument(
        "--reasoning",
        choices=REASONING_LEVELS,
        help="offer a reasoning effort option (low, medium, high) with this default; it is sent "
        "as reasoning_effort, which only reasoning models take",
    )
    model.add_argument(
        "--base-url",
        metavar="URL",
        help="the API root, for a gateway or a compatible server (default: "
        + ", ".join(f"{p.default_base_url} for {p.name}" for p in LIVE_PROVIDERS.values())
        + "); openai requests go to URL/chat/completions, anthropic ones to URL/v1/messages",
    )
    model.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the environment variable holding the API key (default: "
        + ", ".join(f"{p.api_key_env} for {p.name}" for p in LIVE_PROVIDERS.values())
        + "); unset or empty sends no key. When it is set, the server starts itself again "
        "without it (the key goes over a private pipe), so neither the server's environment, "
        "/proc/PID/environ included, nor the programs it runs hold the key",
    )
    model.add_argument(
        "--max-tokens",
        metavar="N",
        type=_positive_int,
        help="the most output tokens one model call may take (default: the provider's; "
        "anthropic's is 32000)",
    )
    model.add_argument(
        "--thinking-budget",
        metavar="TOKENS",
        type=_positive_int,
        help="anthropic: extended thinking with this many tokens of budget (at least 1024, "
        "less than --max-tokens); default off",
    )
    model.add_argument(
        "--connect-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        help="connection timeout (default 10)",
    )
    model.add_argument(
        "--read-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        help="longest wait for the next bytes of a response (default 300)",
    )
    model.add_argument(
        "--max-retries",
        metavar="N",
        type=_non_negative_int,
        help="retries of a request that fails before its first chunk (429, 5xx, timeouts, "
        "connection errors), with exponential backoff (default 3)",
    )


def _add_login(commands: _Commands) -> None:
    commands.add_parser(
        "login",
        help="store the API key for --provider openai (read without echo)",
        description="Read the API key from the terminal without showing it and store it in the "
        "platform's config directory, readable by you alone; the server uses it when the "
        "provider's environment variable is unset. A client's terminal auth method runs this.",
    )


def _add_logout(commands: _Commands) -> None:
    commands.add_parser(
        "logout",
        help="remove the stored API key",
        description="Remove the API key `acp-server login` stored.",
    )


def _add_demo(commands: _Commands) -> None:
    demo = commands.add_parser(
        "demo",
        help="run a recorded session end to end and show what it stored",
        description="Spawn the real server, drive the bundled recording through it as an editor "
        "would, load the session in a fresh process, page its history and show the log's figures.",
    )
    demo.add_argument(
        "--keep",
        metavar="DIR",
        type=_path,
        help="keep the workspace and the session log in DIR (an empty directory)",
    )


def _add_log(commands: _Commands) -> None:
    log = commands.add_parser(
        "log",
        help="inspect a session log: stats, verify or cat",
        description="Inspect a session log. PATH is a session directory, a session.jsonl or a "
        "session.jsonl.zst.",
    )
    actions = log.add_subparsers(
        dest="action", metavar="ACTION", parser_class=_Parser, required=True
    )
    for action, text in (
        ("stats", "events by type, chunk rows, bytes packed vs unpacked"),
        ("verify", "check every rule of the log format; exit status 1 with every problem found"),
        ("cat", "print the logical events as JSON lines (chunk rows expanded)"),
    ):
        sub = actions.add_parser(action, help=text, description=text)
        sub.add_argument(
            "path",
            metavar="PATH",
            type=_path,
            help="a session directory or a log file; with --store, the session id",
        )
        sub.add_argument(
            "--store",
            metavar="URL",
            help="read the session PATH names from this store (a directory, file:///abs/dir "
            "or sqlite:///abs/path.db)",
        )


def _add_store(commands: _Commands) -> None:
    store = commands.add_parser(
        "store",
        help="copy sessions between stores, verify a store, or set one up",
        description="Work with session stores (a directory, file:///abs/dir, "
        "sqlite:///abs/path.db or postgresql://user@host:port/db).",
    )
    store_actions = store.add_subparsers(
        dest="action", metavar="ACTION", parser_class=_Parser, required=True
    )
    copy = store_actions.add_parser(
        "copy",
        help="copy sessions from SRC to DST, record for record",
        description="Copy sessions from the store SRC to the store DST, record for record. A "
        "session DST already holds is left as it is when it is the same session and refused "
        "when it is another one of the same id.",
    )
    copy.add_argument("source", metavar="SRC", help="the store to copy from")
    copy.add_argument("target", metavar="DST", help="the store to copy to")
    copy.add_argument(
        "--session",
        metavar="ID",
        action="append",
        dest="sessions",
        help="copy only this session (repeat for more; default: every session)",
    )
    verify = store_actions.add_parser(
        "verify",
        help="check every session of a store as log verify does",
        description="Check every session of a store as `acp-server log verify` checks one; "
        "exit status 1 when one fails.",
    )
    verify.add_argument("source", metavar="URL", help="the store to check")
    init = store_actions.add_parser(
        "init",
        help="create a database store's tables",
        description="Create the tables of the store URL names (a database is also set up on "
        "first use); a store of another schema version is refused.",
    )
    init.add_argument("source", metavar="URL", help="the store to set up")


def _add_fixture(commands: _Commands) -> None:
    fixture = commands.add_parser(
        "fixture",
        help="turn a recorded session into a replay fixture",
        description="Work with llm-replay fixtures (snapshot scenarios' session.jsonl files).",
    )
    fixture_actions = fixture.add_subparsers(
        dest="action", metavar="ACTION", parser_class=_Parser, required=True
    )
    export = fixture_actions.add_parser(
        "export",
        help="write a session's log (and its subagents' logs) as a scenario's fixture",
        description="Write SESSION_DIR's log as SCENARIO_DIR/session.jsonl (canonical packed, "
        "projected form), its subagents' logs as session.1.jsonl, session.2.jsonl, ... (found under "
        "the same sessions root), and a replay.override.json for model calls that failed or were "
        "cancelled. Session ids become <session-1>, <session-2>, ...; the session's cwd becomes "
        "<workspace>; times become relative to the first event. Other fixture files in "
        "SCENARIO_DIR (stale children, an old override) are removed; input.json and workspace/ "
        "are left alone.",
    )
    export.add_argument(
        "session_dir",
        metavar="SESSION_DIR",
        type=_path,
        help="a session directory (<sessions root>/<id>)",
    )
    export.add_argument(
        "scenario_dir",
        metavar="SCENARIO_DIR",
        type=_path,
        help="the scenario directory to write (created if missing)",
    )
    export.add_argument(
        "--zero-times",
        action="store_true",
        help="set every time to 0, as snapshot scenarios store them (default: keep the gaps between chunks)",
    )
    export.add_argument(
        "--keep-cwd",
        action="store_true",
        help="keep the session's cwd as it was instead of <workspace>",
    )


_COMMANDS: Final[dict[str, Callable[[_Commands], None]]] = {
    "serve": _add_serve,
    "login": _add_login,
    "logout": _add_logout,
    "demo": _add_demo,
    "log": _add_log,
    "store": _add_store,
    "fixture": _add_fixture,
}
COMMAND_NAMES: Final = frozenset(_COMMANDS)


def _with_default_command(argv: list[str]) -> list[str]:
    """`acp-server` and `acp-server --flag ...` mean `acp-server serve ...`."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        return ["serve", *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    if os.environ.get("ACP_SERVER_LOGIN") == "1":
        # A client's terminal auth method (SPEC 4.4): the user's own command line, plus this.
        from .login_command import run_login

        return run_login()
    arguments = _with_default_command(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(arguments[0] if arguments[0] in COMMAND_NAMES else None)
    args = parser.parse_args(arguments)
    if args.command == "demo":
        from .demo import run_demo

        return run_demo(keep=args.keep)
    if args.command == "serve":
        return _serve(parser, args, may_reexec=argv is None)
    if args.command in ("login", "logout"):
        from .login_command import run_login, run_logout

        return run_login() if args.command == "login" else run_logout()
    if args.command == "log":
        if args.store is not None:
            from .log_command import run_stored_log_command

            return run_stored_log_command(args.action, args.store, str(args.path))
        from .log_command import run_log_command

        return run_log_command(args.action, args.path)
    if args.command == "store":
        from .store_command import run_store_command

        urls = [args.source] + ([args.target] if args.action == "copy" else [])
        return run_store_command(args.action, urls, getattr(args, "sessions", None))
    if args.command == "fixture":
        from .fixture_command import run_fixture_command

        return run_fixture_command(args)
    parser.print_help(sys.stderr)
    return 2


_LIVE_MODEL_FLAGS: Final = {
    "model": "--model",
    "models": "--models",
    "reasoning": "--reasoning",
    "base_url": "--base-url",
    "api_key_env": "--api-key-env",
    "connect_timeout": "--connect-timeout",
    "read_timeout": "--read-timeout",
    "max_retries": "--max-retries",
    "max_tokens": "--max-tokens",
    "thinking_budget": "--thinking-budget",
}
_COMMON_LIVE_OPTIONS: Final = frozenset(
    {"model", "models", "base_url", "api_key_env", "connect_timeout", "read_timeout", "max_retries"}
)


def _model_options(args: argparse.Namespace) -> dict[str, Any]:
    """`ServeConfig`'s provider fields from the flags; `ValueError` for flags that do not go
    together. Each provider's flags are refused with another provider."""
    given = {key: getattr(args, key) for key in _LIVE_MODEL_FLAGS if getattr(args, key) is not None}
    spec = live_provider(args.provider)
    if spec is None:
        if given:
            first = next(iter(given))
            takers = [p.name for p in LIVE_PROVIDERS.values() if _takes(p.options, first)]
            raise ValueError(
                f"{_LIVE_MODEL_FLAGS[first]} applies to --provider {' or '.join(takers)} only"
            )
        return {}
    for flag, value in (
        ("--replay", args.replay),
        ("--replay-override", args.replay_override),
        ("--pace-ms", args.pace_ms),
    ):
        if value:
            raise ValueError(f"{flag} applies to --provider {REPLAY} only")
    for key in given:
        if not _takes(spec.options, key):
            takers = [p.name for p in LIVE_PROVIDERS.values() if _takes(p.options, key)]
            raise ValueError(
                f"{_LIVE_MODEL_FLAGS[key]} applies to --provider {' or '.join(takers)} only"
            )
    if not args.model:
        raise ValueError(f"--provider {spec.name} needs --model")
    from .providers.http import ProviderConfigError, validate_base_url, validate_env_name

    try:
        if "base_url" in given:
            given["base_url"] = validate_base_url(given["base_url"])
    except ProviderConfigError as exc:
        raise ValueError(f"--base-url: {exc}") from None
    try:
        if "api_key_env" in given:
            validate_env_name(given["api_key_env"])
    except ProviderConfigError as exc:
        raise ValueError(f"--api-key-env: {exc}") from None
    given.setdefault("api_key_env", spec.api_key_env)
    return {"provider": spec.name, **given}


def _takes(options: frozenset[str], key: str) -> bool:
    return key in _COMMON_LIVE_OPTIONS or key in options


def _api_key(env_name: str, *, may_reexec: bool) -> Secret | None:
    """The key: the one handed over by the process that started this one again without
    `$env_name`, else from the key sources (`$env_name` itself, taken out of the environment).
    Starts this process again first when a key is in the environment and the command line
    is this process's own (`may_reexec`), so that `/proc/PID/environ` does not hold it."""
    from .providers.secret import find_key, handed_over_key

    key = handed_over_key(env_name)
    if key is not None:
        return key
    if may_reexec:
        _reexec_without_keys(env_name)
    return find_key(env_name)


def _reexec_without_keys(env_name: str | None) -> None:
    """Start this process again when `$env_name` (the key it uses, handed over) or any
    provider's key variable is in its environment: the programs it runs can read
    `/proc/PPID/environ`, and a key it never uses is still a key."""
    from .providers.registry import key_variables
    from .providers.secret import can_reexec, reexec_without

    names = key_variables() | ({env_name} if env_name else set())
    if any(os.environ.get(name) for name in names) and can_reexec():
        reexec_without(env_name, names)


def _read_token(path: Path) -> Secret:
    """The token in `path`: its text, surrounding whitespace left out (`ValueError` if none)."""
    from .paths import unreachable
    from .providers.secret import Secret

    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ValueError(f"{unreachable(path)}: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    if not text:
        raise ValueError(f"{path} is empty: it must hold the token")
    if any(c.isspace() for c in text):
        raise ValueError(f"{path} must hold one token, without spaces or line breaks inside")
    return Secret(text)


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace, *, may_reexec: bool) -> int:
    from .paths import unreachable
    from .providers.secret import SecretError
    from .server.config import REPLAY_FILE_ENV, STORE_ENV, ServeConfig, default_sessions_dir

    def fail(message: str) -> NoReturn:
        parser.exit(2, f"acp-server serve: error: {message}\n")

    store = None
    if args.store is not None and args.sessions_dir is not None:
        return fail("--store and --sessions-dir: give one of them (a directory is a store URL)")
    store_text = args.store
    if store_text is None and args.sessions_dir is None:
        store_text = os.environ.get(STORE_ENV) or None
    if store_text is not None:
        from .storage.url import check_store_url, parse_store_url

        flag = "--store" if args.store is not None else STORE_ENV
        try:
            store = parse_store_url(store_text)
        except ValueError as exc:
            return fail(f"{flag}: {exc}")
        problem = check_store_url(store)
        if problem is not None:
            return fail(f"{flag}: {problem}")
    sessions_dir = args.sessions_dir if args.sessions_dir is not None else default_sessions_dir()
    if store is None and os.path.lexists(sessions_dir) and not sessions_dir.is_dir():
        reason = "not a directory" if sessions_dir.exists() else unreachable(sessions_dir)
        return fail(f"--sessions-dir: {reason}: {sessions_dir}")
    try:
        model_options = _model_options(args)
    except ValueError as exc:
        return fail(str(exc))
    if "provider" in model_options:
        try:
            model_options["api_key"] = _api_key(model_options["api_key_env"], may_reexec=may_reexec)
        except SecretError as exc:
            return fail(str(exc))
    elif may_reexec:
        try:
            _reexec_without_keys(None)  # llm-replay takes no key
        except SecretError as exc:
            return fail(str(exc))
    replay = args.replay
    if replay is None and args.provider == REPLAY and os.environ.get(REPLAY_FILE_ENV):
        replay = Path(os.environ[REPLAY_FILE_ENV])
    if replay is not None and not replay.exists():
        return fail(f"--replay: {unreachable(replay)}: {replay}")
    if args.replay_override is not None and not args.replay_override.is_file():
        override = args.replay_override
        reason = "not a regular file" if override.exists() else unreachable(override)
        return fail(f"--replay-override: {reason}: {override}")
    token = None
    if args.token_file is not None:
        if args.listen is None:
            return fail("--token-file: only with --listen")
        try:
            token = _read_token(args.token_file)
        except ValueError as exc:
            return fail(f"--token-file: {exc}")
    elif args.listen is None and (args.allow_origin or args.max_pending_requests != 64):
        given = "--allow-origin" if args.allow_origin else "--max-pending-requests"
        return fail(f"{given}: only with --listen")
    config = ServeConfig(
        sessions_dir=sessions_dir,
        store=store,
        replay=replay,
        replay_override=args.replay_override,
        pace_ms=args.pace_ms,
        max_steps=args.max_steps,
        compression=args.compression,
        pack=not args.no_pack,
        log_level=args.log_level,
        max_line_bytes=args.max_line_bytes,
        mcp_timeout=args.mcp_timeout,
        mcp_connect_timeout=args.mcp_connect_timeout,
        mode=args.mode,
        context_window=args.context_window,
        compact_at=args.compact_at,
        price_input=args.price_input,
        price_output=args.price_output,
        listen=args.listen,
        token=token,
        allowed_origins=tuple(args.allow_origin),
        max_pending_requests=args.max_pending_requests,
        **model_options,
    )
    from .server.app import run_server

    return run_server(config)
