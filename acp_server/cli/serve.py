"""`acp-server serve`: its flags read together into one `ServeConfig`, then the server.

`serve_flags` reads each flag alone; here are the rules between them (one of `--store` and
`--sessions-dir`; each provider's flags with that provider only; the network flags with
`--listen` only), the environment's fallbacks (the store's, chosen as every command chooses it
(`store_choice`), `$ACP_SERVER_STORE_READ`, `$ACP_REPLAY_FILE` and the API key's variables),
and the checks of the files the flags name, made in an order that decides which of several problems is the one reported. The API key is found
here too: when one is in the environment, the process first starts itself again without it
(`providers.secret`). A problem is one line on stderr and status 2, as argparse reports a bad
flag.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..providers.registry import LIVE_PROVIDERS, REPLAY, live_provider

if TYPE_CHECKING:
    from ..core.prompt_render import PromptBase
    from ..providers.secret import Secret
    from ..server.config import ServeConfig
    from ..storage.url import StoreUrl


REPLAY_FILE_ENV: Final = "ACP_REPLAY_FILE"
"""llm-replay's fixture when `--replay` is not given."""


class ServeFlagsError(Exception):
    """Flags that do not go together, or a file or environment variable they name that cannot
    be used: the message is the line `serve` reports."""


def run_serve(
    parser: argparse.ArgumentParser, args: argparse.Namespace, *, may_reexec: bool
) -> int:
    """Serve as `args` ask, until the input ends or a signal; a problem exits with status 2."""
    try:
        config = serve_config(args, may_reexec=may_reexec)
    except ServeFlagsError as exc:
        parser.exit(2, f"acp-server serve: error: {exc}\n")
    from ..server.app import run_server

    return run_server(config)


def serve_config(args: argparse.Namespace, *, may_reexec: bool) -> ServeConfig:
    """The `ServeConfig` that `args` (parsed by `serve_flags`) and the environment ask for;
    `ServeFlagsError` for the first problem, in the order the checks below are made. With
    `may_reexec`, the process may start itself again first, without the keys in its
    environment (see `_api_key`)."""
    from ..paths import unreachable
    from ..providers.secret import SecretError
    from ..server.config import ServeConfig
    from .store_choice import StoreChoiceError, chosen_store, source_phrase

    try:
        choice, url = chosen_store(args.store, args.sessions_dir)
    except StoreChoiceError as exc:
        raise ServeFlagsError(str(exc)) from None
    store = None if choice.is_directory else url
    store_read = _store_read(args.store_read, url)
    # With a store URL the directory is not used: `store` names where the sessions are.
    sessions_dir = url.path if choice.is_directory and url.path is not None else Path(".")
    try:
        model_options = _model_options(args)
    except ValueError as exc:
        raise ServeFlagsError(str(exc)) from None
    if "provider" in model_options:
        try:
            model_options["api_key"] = _api_key(model_options["api_key_env"], may_reexec=may_reexec)
        except SecretError as exc:
            raise ServeFlagsError(str(exc)) from None
    elif may_reexec:
        try:
            _reexec_without_keys(None)  # llm-replay takes no key
        except SecretError as exc:
            raise ServeFlagsError(str(exc)) from None
    replay = args.replay
    if replay is None and args.provider == REPLAY and os.environ.get(REPLAY_FILE_ENV):
        replay = Path(os.environ[REPLAY_FILE_ENV])
    if replay is not None and not replay.exists():
        raise ServeFlagsError(f"--replay: {unreachable(replay)}: {replay}")
    if args.replay_override is not None and not args.replay_override.is_file():
        override = args.replay_override
        reason = "not a regular file" if override.exists() else unreachable(override)
        raise ServeFlagsError(f"--replay-override: {reason}: {override}")
    system_prompt = None
    if args.system_prompt_file is not None:
        try:
            system_prompt = _read_system_prompt(args.system_prompt_file)
        except ValueError as exc:
            raise ServeFlagsError(f"--system-prompt-file: {exc}") from None
    if args.titles == "model" and live_provider(args.provider) is None:
        raise ServeFlagsError(
            f"--titles model: --provider {REPLAY} makes no model call for a title "
            "(its titles are the prompt's: --titles prompt)"
        )
    token = None
    if args.token_file is not None:
        if args.listen is None:
            raise ServeFlagsError("--token-file: only with --listen")
        try:
            token = _read_token(args.token_file)
        except ValueError as exc:
            raise ServeFlagsError(f"--token-file: {exc}") from None
    elif args.listen is None and (args.allow_origin or args.max_pending_requests != 64):
        given = "--allow-origin" if args.allow_origin else "--max-pending-requests"
        raise ServeFlagsError(f"{given}: only with --listen")
    return ServeConfig(
        sessions_dir=sessions_dir,
        store=store,
        store_read=store_read,
        store_source=source_phrase(choice),
        store_retry=args.store_retry,
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
        detached_permission_timeout=args.detached_permission_timeout,
        mode=args.mode,
        titles=args.titles,
        context_window=args.context_window,
        compact_at=args.compact_at,
        price_input=args.price_input,
        price_output=args.price_output,
        listen=args.listen,
        socket=args.socket,
        token=token,
        allowed_origins=tuple(args.allow_origin),
        max_pending_requests=args.max_pending_requests,
        system_prompt=system_prompt,
        **model_options,
    )


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


def _store_read(given: str | None, store: StoreUrl) -> str | None:
    """`--store-read` (else `$ACP_SERVER_STORE_READ`): a PostgreSQL URL, with a PostgreSQL
    store only (`ServeFlagsError` naming where it was given, its password hidden)."""
    from ..startup.store_location import STORE_READ_ENV
    from ..storage.redact import redact_url
    from ..storage.url import parse_store_url

    source = "--store-read"
    if given is None:
        given, source = os.environ.get(STORE_READ_ENV) or None, f"${STORE_READ_ENV}"
    if given is None:
        return None
    try:
        engine = parse_store_url(given).engine
    except ValueError as exc:
        raise ServeFlagsError(f"{source}: {exc}") from None
    if engine != "postgresql":
        raise ServeFlagsError(
            f"{source}: {redact_url(given)}: the standbys' URL is postgresql://... "
            f"(a {engine} store has no standbys)"
        )
    if store.engine != "postgresql":
        raise ServeFlagsError(
            f"{source}: only with a PostgreSQL store (the store is {store.shown}, a {store.engine} "
            "store: it has no standbys)"
        )
    return given


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
    from ..providers.http import ProviderConfigError, validate_base_url, validate_env_name

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
    from ..providers.secret import find_key, handed_over_key

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
    from ..providers.registry import key_variables
    from ..providers.secret import can_reexec, reexec_without

    names = key_variables() | ({env_name} if env_name else set())
    if any(os.environ.get(name) for name in names) and can_reexec():
        reexec_without(env_name, names)


SYSTEM_PROMPT_MAX_BYTES: Final = 256 * 1024
"""The largest `--system-prompt-file` (a system prompt is sent with every model request)."""


def _read_system_prompt(path: Path) -> PromptBase:
    """The fixed text of the system prompt in `path` (`ValueError` saying why it cannot be)."""
    from ..core.prompt_render import PromptBase
    from ..paths import unreachable

    if not path.exists():
        raise ValueError(f"{unreachable(path)}: {path}")
    if not path.is_file():  # a directory, or a FIFO whose open would wait for a writer
        raise ValueError(f"not a regular file: {path}")
    try:
        with path.open("rb") as file:
            data = file.read(SYSTEM_PROMPT_MAX_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > SYSTEM_PROMPT_MAX_BYTES:
        raise ValueError(f"{path} is over {SYSTEM_PROMPT_MAX_BYTES // 1024} KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    if not text.strip():
        raise ValueError(f"{path} is empty: it must hold the system prompt's text")
    return PromptBase(text, str(path.absolute()))


def _read_token(path: Path) -> Secret:
    """The token in `path`: its text, surrounding whitespace left out (`ValueError` if none)."""
    from ..paths import unreachable
    from ..providers.secret import Secret

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
