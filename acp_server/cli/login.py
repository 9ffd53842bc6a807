"""`acp-server login` and `acp-server logout` (SPEC 4.4, 8): the stored API keys.

`login` reads a key from the terminal without echoing it and stores it for one provider (and
API root: `providers.credentials.KeyName`), readable by its owner alone; that provider uses it
when its environment variable is unset. `logout` removes one provider's key, or all of them.
Neither ever prints a key.

A client's terminal auth method runs the server's own command line with `ACP_SERVER_LOGIN=1`
(`run_terminal_login`): the key is stored for the `--provider` and `--base-url` that command
line names, so that the server that asked for it finds it, and no other provider does.
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Sequence

from ..providers.credentials import (
    LEGACY_PROVIDER,
    CredentialsError,
    KeyName,
    credentials_path,
    key_name,
    remove_key,
    store_key,
)
from ..providers.names import takes_a_key
from ..providers.secret import Secret


def run_login(provider: str, base_url: str | None) -> int:
    """Read a key and store it for `provider` at `base_url` (None: its default API root)."""
    try:
        name = _checked_name(provider, base_url)
    except ValueError as exc:
        sys.stderr.write(f"acp-server login: error: {exc}\n")
        return 2
    try:
        key = getpass.getpass(f"API key for {name} (not shown): ").strip()
    except (EOFError, KeyboardInterrupt):
        sys.stderr.write("\nacp-server login: no key given; nothing stored\n")
        return 1
    if not key:
        sys.stderr.write("acp-server login: no key given; nothing stored\n")
        return 1
    try:
        path = store_key(Secret(key), name)
    except (OSError, CredentialsError) as exc:
        sys.stderr.write(f"acp-server login: error: cannot store the key: {exc}\n")
        return 2
    sys.stderr.write(f"acp-server login: key for {name} stored in {path} (readable by you alone)\n")
    return 0


def run_terminal_login(argv: Sequence[str]) -> int:
    """The terminal auth method: `login` for the provider and API root of the server command
    line `argv` (which is not parsed otherwise: it may hold any serve flag)."""
    return run_login(
        _flag_value(argv, "--provider") or LEGACY_PROVIDER, _flag_value(argv, "--base-url")
    )


def run_logout(provider: str | None, base_url: str | None) -> int:
    """Remove the key stored for `provider` at `base_url`; every stored key when `provider`
    is None."""
    path = credentials_path()
    name: KeyName | None = None
    if provider is not None:
        try:
            name = _checked_name(provider, base_url)
        except ValueError as exc:
            sys.stderr.write(f"acp-server logout: error: {exc}\n")
            return 2
    elif base_url is not None:
        sys.stderr.write("acp-server logout: error: --base-url: only with --provider\n")
        return 2
    try:
        removed = remove_key(name, path)
    except CredentialsError as exc:
        sys.stderr.write(f"acp-server logout: error: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"acp-server logout: error: cannot change {path}: {exc.strerror}\n")
        return 2
    which = "every stored key" if name is None else f"the key for {name}"
    none = "no stored key" if name is None else f"no stored key for {name}"
    sys.stderr.write(
        f"acp-server logout: removed {which} from {path}\n"
        if removed
        else f"acp-server logout: {none}\n"
    )
    return 0


def _checked_name(provider: str, base_url: str | None) -> KeyName:
    """The key's name; `ValueError` for a provider that takes no key, or an API root the
    server would refuse too."""
    if not takes_a_key(provider):
        raise ValueError(f"--provider: {provider!r} takes no API key")
    if base_url is None:
        return key_name(provider, None)
    from ..providers.http import ProviderConfigError, validate_base_url

    try:
        return key_name(provider, validate_base_url(base_url))
    except ProviderConfigError as exc:
        raise ValueError(f"--base-url: {exc}") from None


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The last value `argv` gives `flag` (`--flag VALUE` or `--flag=VALUE`), or None."""
    value = None
    for index, argument in enumerate(argv):
        if argument == flag and index + 1 < len(argv):
            value = argv[index + 1]
        elif argument.startswith(flag + "="):
            value = argument[len(flag) + 1 :]
    return value
