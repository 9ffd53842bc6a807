"""Stored credentials (SPEC 4.4): the API key `acp-server login` saves, readable by its owner alone.

The key lives in `credentials.json` in the platform's user config directory (or
`$ACP_SERVER_CONFIG_DIR`), a directory made 0700 and a file written 0600 through a temporary
file and a rename, so it is never readable by anyone else, not even half written. A stored file
that others could read is refused rather than used. The key is only ever held as a `Secret`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

from .secret import Secret

CONFIG_DIR_ENV: Final = "ACP_SERVER_CONFIG_DIR"
CREDENTIALS_NAME: Final = "credentials.json"


class CredentialsError(Exception):
    """The stored credentials cannot be used (unsafe permissions, not what login writes)."""


def credentials_path() -> Path:
    configured = os.environ.get(CONFIG_DIR_ENV)
    if configured:
        return Path(configured) / CREDENTIALS_NAME
    import platformdirs  # only needed when no directory was given

    return Path(platformdirs.user_config_dir("acp-server", appauthor=False)) / CREDENTIALS_NAME


def credentials_directory() -> Path:
    """The directory the stored key lives in (with `store_key`'s temporary files), resolved:
    the file tools refuse it, so that no tool call reads the key whatever the session's
    directories are."""
    return Path(os.path.realpath(credentials_path().parent))


def store_key(key: Secret, path: Path | None = None) -> Path:
    """Save `key`, replacing any stored one; the file's path."""
    path = credentials_path() if path is None else path
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    import json  # here, not at the top: a server start that reads no key never needs it

    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump({"apiKey": key.reveal()}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return path


def load_key(path: Path | None = None) -> Secret | None:
    """The stored key, or None when there is none; `CredentialsError` when it is unsafe."""
    path = credentials_path() if path is None else path
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
        raw = file.read(64 * 1024)
    import json

    try:
        value = json.loads(raw)
    except ValueError:
        raise CredentialsError(f"{path}: not what `acp-server login` writes") from None
    key = value.get("apiKey") if isinstance(value, dict) else None
    if not isinstance(key, str) or not key:
        raise CredentialsError(f"{path}: not what `acp-server login` writes")
    return Secret(key)


def remove_key(path: Path | None = None) -> bool:
    """Delete the stored key; False when there was none."""
    path = credentials_path() if path is None else path
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
