"""`acp-server login` and `acp-server logout` (SPEC 4.4, 8): the stored API key.

`login` reads the key from the terminal without echoing it and stores it readable by its owner
alone (`providers.credentials`); the server uses it when the provider's environment variable
is unset. `logout` removes it. Neither ever prints the key.
"""

from __future__ import annotations

import getpass
import sys

from ..providers.credentials import CredentialsError, credentials_path, remove_key, store_key
from ..providers.secret import Secret


def run_login() -> int:
    try:
        key = getpass.getpass("API key (not shown): ").strip()
    except (EOFError, KeyboardInterrupt):
        sys.stderr.write("\nacp-server login: no key given; nothing stored\n")
        return 1
    if not key:
        sys.stderr.write("acp-server login: no key given; nothing stored\n")
        return 1
    try:
        path = store_key(Secret(key))
    except (OSError, CredentialsError) as exc:
        sys.stderr.write(f"acp-server login: error: cannot store the key: {exc}\n")
        return 2
    sys.stderr.write(f"acp-server login: key stored in {path} (readable by you alone)\n")
    return 0


def run_logout() -> int:
    path = credentials_path()
    try:
        removed = remove_key(path)
    except OSError as exc:
        sys.stderr.write(f"acp-server logout: error: cannot remove {path}: {exc.strerror}\n")
        return 2
    sys.stderr.write(
        f"acp-server logout: removed {path}\n" if removed else "acp-server logout: no stored key\n"
    )
    return 0
