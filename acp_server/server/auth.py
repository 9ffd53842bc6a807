"""Authentication (SPEC 4.4): whether the provider has the key it needs, `authenticate`, `logout`.

`KeyAuth` watches the key of a provider that sends one (the OpenAI-compatible one): from its
environment variable, else from the credentials `acp-server login` stored. A provider with no
key and an endpoint that is not on this machine needs authentication: `session/new` is refused
with -32000 until `authenticate` finds a key (say, after `acp-server login` in a terminal).
`logout` removes the stored credentials, and the key they gave. `NoAuth` is the replay
provider's: nothing is needed; logout still removes stored credentials. Only a provider that
needs a key lists auth methods in `initialize`.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Protocol
from urllib.parse import urlsplit

from ..providers.credentials import CredentialsError, load_key, remove_key
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

    def logout(self) -> None:
        """Remove the stored credentials, and the key they gave."""


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
    def __init__(self, provider: KeyHolder, *, key_required: bool) -> None:
        self.provider = provider
        self.key_required = key_required
        self.from_store = False
        if provider.api_key is None:
            self._load()

    def _load(self) -> None:
        try:
            key = load_key()
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

    def logout(self) -> None:
        remove_key()
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

    def logout(self) -> None:
        remove_key()
