"""`acp-server serve`'s flags: the parser of the default command, nothing else.

What the flags mean together (which go with which provider, the environment's fallbacks, the
files they name) is `acp_server.cli.serve`'s; here each flag is read alone, and a value that
cannot be one (`--pace-ms -1`, `--listen host:port:x`) is refused as argparse refuses any bad
argument.
"""

from __future__ import annotations

import argparse

from ..core.compaction import DEFAULT_COMPACT_AT
from ..core.modes import MODE_IDS, REASONING_LEVELS
from ..core.titles import TITLE_MODES
from ..providers.registry import LIVE_PROVIDERS, PROVIDER_NAMES, REPLAY
from .arguments import EXIT_STATUS, Commands, non_negative_int, path, positive_int

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _compact_share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}")
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


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text!r}")
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


def _serve_epilog() -> str:
    """Where the sessions are with no --store or --sessions-dir, and the exit statuses."""
    from .store_choice import CHOICE_HELP, StoreChoiceError, chosen_store, describe

    try:
        where = f"Sessions are stored in {describe(*chosen_store(None, None))}."
    except StoreChoiceError as exc:
        where = f"The sessions' store cannot be used: {exc}."
    return f"{where} The store is chosen by {CHOICE_HELP}. {EXIT_STATUS['serve']}"


def add_serve(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve ACP over stdio (the default)",
        description="Serve the Agent Client Protocol over stdin/stdout: one JSON-RPC message per "
        "line. Protocol frames only on stdout; logs on stderr. Exit status: 0 at the end of "
        "input, and on SIGTERM or SIGINT once the shutdown completed (every session's log "
        "written and closed); 128 + the signal (143 for SIGTERM, 130 for SIGINT) only when that "
        "shutdown could not finish cleanly, or when a second signal cut it short; 2 when the "
        "server cannot start.",
    )
    serve.late_epilog = _serve_epilog
    serve.add_argument(
        "--sessions-dir",
        metavar="DIR",
        type=path,
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
        "--store-read",
        metavar="URL",
        help="a PostgreSQL store's standbys, where what only reads goes first (pages, "
        "sessions another process writes, session/list, following): postgresql://... with "
        "one or more hosts; a standby behind or unreachable leaves the read to --store "
        "(default: $ACP_SERVER_STORE_READ, else every read goes to --store)",
    )
    serve.add_argument(
        "--store-retry",
        metavar="SECONDS",
        type=_seconds,
        default=30.0,
        help="how long a session's writer keeps reconnecting to a PostgreSQL store it lost (a "
        "restart, a failover) while its turn goes on, before the turn fails; 0: at once "
        "(default 30)",
    )
    serve.add_argument(
        "--replay",
        metavar="FIXTURE",
        type=path,
        help="recorded session to replay as the model: a session.jsonl or a scenario directory "
        "(default: $ACP_REPLAY_FILE, else the bundled demo recording)",
    )
    serve.add_argument(
        "--replay-override",
        metavar="FILE",
        type=path,
        help="a replay.override.json to use instead of the one beside the fixture",
    )
    serve.add_argument(
        "--pace-ms",
        metavar="N",
        type=non_negative_int,
        default=0,
        help="delay each replayed chunk by N ms (default 0)",
    )
    serve.add_argument(
        "--max-steps",
        metavar="N",
        type=positive_int,
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
        type=positive_int,
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
        "--detached-permission-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=600.0,
        help="how long a turn whose clients have all gone waits for one to attach and answer "
        "a permission request; then the request is rejected (default 600)",
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
        "--titles",
        choices=TITLE_MODES,
        help="how a session without a title gets one after its first completed turn: model "
        "(a short call to the live model, with its key; the default with a live provider), "
        "prompt (the first line of the first prompt; llm-replay's default) or off; /title "
        "and session/set_title always win",
    )
    serve.add_argument(
        "--context-window",
        metavar="TOKENS",
        type=positive_int,
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
    serve.add_argument(
        "--system-prompt-file",
        metavar="FILE",
        type=path,
        help="a UTF-8 text file whose text replaces the fixed part of the system prompt; the "
        "session's directories, platform, date, mode, tools and project instructions "
        "(AGENTS.md) are still added after it (default: the package's text for a live "
        "provider; llm-replay sends none)",
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
        "--socket",
        metavar="PATH",
        type=path,
        help="serve many connections on the Unix socket PATH instead of stdio, until SIGTERM or "
        "SIGINT (with --listen, WebSocket too): the shared server `acp-server attach` starts "
        "and relays to. Its directory must be yours alone (mode 0700); the socket is made "
        "0600 and a peer of another user is refused",
    )
    network.add_argument(
        "--token-file",
        metavar="FILE",
        type=path,
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
        type=positive_int,
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
        type=positive_int,
        help="the most output tokens one model call may take (default: the provider's; "
        "anthropic's is 32000)",
    )
    model.add_argument(
        "--thinking-budget",
        metavar="TOKENS",
        type=positive_int,
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
        type=non_negative_int,
        help="retries of a request that fails before its first chunk (429, 5xx, timeouts, "
        "connection errors), with exponential backoff (default 3)",
    )
