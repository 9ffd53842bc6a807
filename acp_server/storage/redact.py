"""Passwords in store URLs are never shown (SPEC 2.6): `redact_url` prints one as `***`, in
the user info (`postgresql://user:pw@a:5432,b:5432/db`, several hosts included) and as a
`password=` parameter (`?password=pw`, libpq's `password=pw` conninfo)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_PASSWORD_PARAMETER = re.compile(r"((?:^|[?&\s])password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)")


def redact_url(text: str) -> str:
    """`text` with its password, if any, shown as `***`."""
    return _redact_user_info(_PASSWORD_PARAMETER.sub(r"\1***", text))


def _redact_user_info(text: str) -> str:
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
