"""jsonrpcserver's dispatch core, imported without the rest of the package.

`import jsonrpcserver` runs the package's `__init__`, which imports `jsonrpcserver.main` (that
builds a jsonschema validator at import time: jsonschema, attrs and referencing are most of the
cost of starting the server) and `jsonrpcserver.server` (http.server). The connection uses
neither: it gives dispatch a validator of its own and serves stdio. So its submodules are loaded
here under a package object whose `__init__` has not run, and that object is taken out of
`sys.modules` again once they are in: a later `import jsonrpcserver` anywhere in the process
runs the real `__init__`, which finds these submodules already imported and uses them (the
same module objects, so the same classes).

`dispatch_to_response` is `jsonrpcserver.main.dispatch_to_response` (5.0.x) without its
defaults: the caller always names its deserializer and validator.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any


def _import_core() -> None:
    if "jsonrpcserver" in sys.modules:
        return  # the whole package is already imported (or this has run)
    spec = importlib.util.find_spec("jsonrpcserver")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("jsonrpcserver is not installed", name="jsonrpcserver")
    package = importlib.util.module_from_spec(spec)
    sys.modules["jsonrpcserver"] = package
    try:
        for name in ("dispatcher", "response", "result", "sentinels"):
            importlib.import_module(f"jsonrpcserver.{name}")
    finally:
        del sys.modules["jsonrpcserver"]


_import_core()

from jsonrpcserver.dispatcher import Deserialized, dispatch_to_response_pure  # noqa: E402
from jsonrpcserver.methods import Methods  # noqa: E402
from jsonrpcserver.response import ErrorResponse, Response  # noqa: E402
from jsonrpcserver.result import Error, Result, Success  # noqa: E402
from jsonrpcserver.sentinels import NOCONTEXT, NODATA  # noqa: E402
from oslash.either import Left  # type: ignore[import-untyped]  # noqa: E402

__all__ = [
    "NODATA",
    "Error",
    "ErrorResponse",
    "Left",
    "Result",
    "Success",
    "dispatch_to_response",
]


def dispatch_to_response(
    request: str,
    methods: Methods,
    *,
    deserializer: Callable[[str], Deserialized],
    validator: Callable[[Deserialized], Deserialized],
    context: Any = NOCONTEXT,
) -> Response | list[Response] | None:
    """Dispatch one request (or batch) to `methods`: its Response, Responses, or None for
    notifications only."""
    return dispatch_to_response_pure(
        deserializer=deserializer,
        validator=validator,
        post_process=lambda response: response,
        context=context,
        methods=methods,
        request=request,
    )
