"""Stored credentials (SPEC 4.4): the API keys `acp-server login` saves, one per provider (and
per API root where that is not the provider's default), readable by their owner alone.

The keys live in `credentials.json` in the platform's user config directory (or
`$ACP_SERVER_CONFIG_DIR`), a directory made 0700 and a file written 0600 through a temporary
file and a rename, so it is never readable by anyone else, not even half written. A stored file
that others could read is refused rather than used. A key is only ever held as a `Secret`.

The file holds `{"keys": [{"provider", "baseUrl"?, "apiKey"}]}`. A key is found by its
`KeyName` alone: a provider reads the entry of its own name and API root, never another's, so
a key stored for one endpoint is never sent to another. The file of earlier versions,
`{"apiKey"}`, held the one key `login` stored "for --provider openai": it is read as the
`openai` key of the default API root, and rewritten in the new form when first read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path
from typing import Any, Final, NamedTuple

from .secret import Secret

CONFIG_DIR_ENV: Final = "ACP_SERVER_CONFIG_DIR"
CREDENTIALS_NAME: Final = "credentials.json"
LEGACY_PROVIDER: Final = "openai"
"""The provider the single key of an earlier file was stored for (its `login` help said so)."""
MAX_FILE_BYTES: Final = 64 * 1024

log = logging.getLogger(__name__)


class CredentialsError(Exception):
    """The stored credentials cannot be used (unsafe permissions, not what login writes)."""


class KeyName(NamedTuple):
    """Which key: a provider's, for its default API root (`base_url` None) or for another."""

    provider: str
    base_url: str | None = None

    def __str__(self) -> str:
        if self.base_url is None:
            return self.provider
        from .http import shown_url  # only for a message, and only for a key of another root

        return f"{self.provider} at {shown_url(self.base_url)}"


def key_name(provider: str, base_url: str | None) -> KeyName:
    """The name of the key `provider` reads for the API root `base_url` (None, or its default
    root with or without a trailing slash: the provider's own key)."""
    from .registry import live_provider

    spec = live_provider(provider)
    root = base_url.rstrip("/") if base_url is not None else None
    if root is None or (spec is not None and root == spec.default_base_url.rstrip("/")):
        return KeyName(provider)
    return KeyName(provider, root)


def credentials_path() -> Path:
    configured = os.environ.get(CONFIG_DIR_ENV)
    if configured:
        return Path(configured) / CREDENTIALS_NAME
    import platformdirs  # only needed when no directory was given

    return Path(platformdirs.user_config_dir("acp-server", appauthor=False)) / CREDENTIALS_NAME


def credentials_directory() -> Path:
    """The directory the stored keys live in (with `_write`'s temporary files), resolved:
    the file tools refuse it, so that no tool call reads a key whatever the session's
    directories are."""
    return Path(os.path.realpath(credentials_path().parent))


def load_keys(path: Path | None = None) -> dict[KeyName, Secret]:
    """Every stored key by name (empty when none is stored); `CredentialsError` when the file
    is unsafe or not what `login` writes. A file of the earlier form is rewritten in this one
    (its key the `openai` key); when that cannot be done its key is still given."""
    path = credentials_path() if path is None else path
    raw = _read(path)
    if raw is None:
        return {}
    import json  # here, not at the top: a server start that reads no key never needs it

    try:
        value = json.loads(raw)
    except ValueError:
        raise CredentialsError(f"{path}: not what `acp-server login` writes") from None
    keys = _parse(value)
    if keys is None:
        raise CredentialsError(f"{path}: not what `acp-server login` writes")
    if isinstance(value, dict) and "keys" not in value:
        try:
            _write(path, keys)
        except OSError as exc:
            log.warning("%s: not rewritten in the current form: %s", path, exc.strerror)
    return keys


def load_key(name: KeyName, path: Path | None = None) -> Secret | None:
    """The key stored as `name`, or None when there is none; `CredentialsError` when the
    stored file is unsafe."""
    return load_keys(path).get(name)


def store_key(key: Secret, name: KeyName, path: Path | None = None) -> Path:
    """Save `key` as `name`, replacing the key stored so (the others are kept); the file's
    path."""
    path = credentials_path() if path is None else path
    keys = load_keys(path)
    keys[name] = key
    _write(path, keys)
    return path


def remove_key(name: KeyName | None = None, path: Path | None = None) -> bool:
    """Delete the key stored as `name`, or every stored key (None); False when there was none.
    The file goes with the last key."""
    path = credentials_path() if path is None else path
    if name is not None:
        keys = load_keys(path)
        if keys.pop(name, None) is None:
            return False
        if keys:
            _write(path, keys)
            return True
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _read(path: Path) -> bytes | None:
    """The file's bytes; None when there is no file; `CredentialsError` when others than its
    owner could read it, or it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CredentialsError(f"{path}: cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(file.fileno()).st_mode
        if not stat.S_ISREG(mode) or mode & 0o077:
            raise CredentialsError(
                f"{path}: readable by others than its owner; run `acp-server login` again"
            )
        return file.read(MAX_FILE_BYTES)


def _parse(value: Any) -> dict[KeyName, Secret] | None:
    """The keys of a decoded file, in either form; None when it is neither."""
    if not isinstance(value, dict):
        return None
    if "keys" not in value:  # the earlier form: the one `openai` key
        key = value.get("apiKey")
        if set(value) != {"apiKey"} or not isinstance(key, str) or not key:
            return None
        return {KeyName(LEGACY_PROVIDER): Secret(key)}
    entries = value["keys"]
    if set(value) != {"keys"} or not isinstance(entries, list):
        return None
    keys: dict[KeyName, Secret] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not set(entry) <= {"provider", "baseUrl", "apiKey"}:
            return None
        provider, base_url, key = entry.get("provider"), entry.get("baseUrl"), entry.get("apiKey")
        if not isinstance(provider, str) or not isinstance(key, str) or not provider or not key:
            return None
        if base_url is not None and not isinstance(base_url, str):
            return None
        keys[KeyName(provider, base_url)] = Secret(key)
    return keys


def _write(path: Path, keys: dict[KeyName, Secret]) -> None:
    """Replace the file with `keys`, atomically, readable by its owner alone."""
    import json

    entries: list[dict[str, str]] = []
    for name, key in sorted(keys.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        entry = {"provider": name.provider}
        if name.base_url is not None:
            entry["baseUrl"] = name.base_url
        entry["apiKey"] = key.reveal()
        entries.append(entry)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump({"keys": entries}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
