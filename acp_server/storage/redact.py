"""Passwords in store URLs are never shown (SPEC 2.6): `redact_url` prints one as `***`."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def redact_url(text: str) -> str:
    """`text` with the password of its user info, if any, shown as `***`."""
    if _SCHEME.match(text) is None:
        return text
    try:
        parts = urlsplit(text)
    except ValueError:
        return re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", text)
    netloc = parts.netloc
    if "@" not in netloc:
        return text
    userinfo, host = netloc.rsplit("@", 1)
    if ":" not in userinfo:
        return text
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
