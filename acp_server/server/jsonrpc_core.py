"""jsonrpcserver's dispatch core, imported without the rest of the package.

`import jsonrpcserver` runs the package's `__init__`, which imports `jsonrpcserver.main` (that
builds a jsonschema validator at import time: jsonschema, attrs and referencing are most of the
cost of starting the server) and `jsonrpcserver.server` (http.server). The connection uses
neither: it gives dispatch a validator of its own and serves stdio. So its submodules are loaded
here under a package object whose `__init__` has not run, and that object is taken out of
`sys.modules` again once they are in: a later `import jsonrpcserver` anywhere in the process
runs the real `__init__`, which finds these submodules already imported and uses them (the
same module objects, so the same classes). jsonrpcserver's results are `oslash.either` values;
`oslash` is entered the same way, without the dozen other monads its `__init__` imports.

`dispatch_to_response` is `jsonrpcserver.main.dispatch_to_response` (5.0.x) without its
defaults: the caller always names its deserializer and validator.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any


def _import_without_package_init(package: str, submodules: tuple[str, ...]) -> None:
    """Import `package.<name>` for each of `submodules`, leaving `package` itself unimported."""
    if package in sys.modules:
        return  # the whole package is already imported
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(f"{package} is not installed", name=package)
    sys.modules[package] = importlib.util.module_from_spec(spec)
    try:
        for name in submodules:
            importlib.import_module(f"{package}.{name}")
    finally:
        del sys.modules[package]


_import_without_package_init("oslash", ("either",))
_import_without_package_init("jsonrpcserver", ("dispatcher", "response", "result", "sentinels"))

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
