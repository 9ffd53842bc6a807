"""Authentication (SPEC 4.4): whether the provider has the key it needs, `authenticate`, `logout`.

`KeyAuth` watches the key of a live provider: from its environment variable, else the key
`acp-server login` stored for that provider and its API root (its `KeyName`: never another
provider's or another root's key). A provider with no key and an endpoint that is not on this
machine needs authentication: `session/new` is refused with -32000 until `authenticate` finds
a key (say, after `acp-server login` in a terminal). `logout` removes that one stored key, and
the key it gave; the other providers' stay. `NoAuth` is the replay provider's: nothing is
needed, and as it reads no key, logout removes none. Only a provider that needs a key lists
auth methods in `initialize`.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Protocol
from urllib.parse import urlsplit

from ..providers.credentials import CredentialsError, KeyName, load_key, remove_key
from ..providers.secret import Secret

log = logging.getLogger(__name__)


class KeyHolder(Protocol):
    """A provider whose key can be given after it was made."""

    api_key: Secret | None


class Auth(Protocol):
    def requires_key(self) -> bool:
        """Whether the provider needs a key at all: then `initialize` lists the auth methods."""

    def needed(self) -> bool:
        """Whether a session cannot start yet for want of a key."""

    def authenticate(self) -> bool:
        """Look for a key again; whether one is now available (or none is needed)."""

    def login_command(self) -> str:
        """The `acp-server login` that stores the key this provider reads."""

    def logout(self) -> None:
        """Remove the stored key of the provider (and API root) this server uses, and the key
        it gave."""


def is_local(base_url: str) -> bool:
    """Whether the endpoint is on this machine (a local server needs no key)."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class KeyAuth:
    def __init__(self, provider: KeyHolder, name: KeyName, *, key_required: bool) -> None:
        self.provider = provider
        self.name = name
        """The stored key this provider reads, and the one `logout` removes."""
        self.key_required = key_required
        self.from_store = False
        if provider.api_key is None:
            self._load()

    def _load(self) -> None:
        try:
            key = load_key(self.name)
        except CredentialsError as exc:
            log.warning("stored credentials not used: %s", exc)
            return
        if key is not None:
            self.provider.api_key = key
            self.from_store = True

    def requires_key(self) -> bool:
        return self.key_required

    def needed(self) -> bool:
        return self.key_required and self.provider.api_key is None

    def authenticate(self) -> bool:
        if self.provider.api_key is None:
            self._load()
        return not self.needed()

    def login_command(self) -> str:
        command = f"acp-server login --provider {self.name.provider}"
        if self.name.base_url is None:
            return command
        from ..providers.http import shown_url  # no user name or password in a message

        return f"{command} --base-url {shown_url(self.name.base_url)}"

    def logout(self) -> None:
        remove_key(self.name)
        if self.from_store:
            self.provider.api_key = None
            self.from_store = False


class NoAuth:
    def requires_key(self) -> bool:
        return False

    def needed(self) -> bool:
        return False

    def authenticate(self) -> bool:
        return True

    def login_command(self) -> str:
        return "acp-server login"

    def logout(self) -> None:
        pass  # llm-replay reads no stored key: the live providers' keys are not its to remove
