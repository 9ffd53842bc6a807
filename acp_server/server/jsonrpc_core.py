"""jsonrpcserver's public names, without the parts of the package this server never runs.

`import jsonrpcserver` runs the package's `__init__`, which imports `jsonrpcserver.main` (that
builds a jsonschema validator at import time: jsonschema, attrs and referencing are most of the
cost of starting the server) and `jsonrpcserver.server` (http.server). The connection uses
neither: it gives dispatch a validator of its own and serves stdio. So the submodules that
define what it does use (`dispatcher`, `response`, `result`) are loaded here under a package
object whose `__init__` has not run, and that object is taken out of `sys.modules` again once
they are in: a later `import jsonrpcserver` anywhere in the process runs the real `__init__`,
which finds these submodules already imported and uses them (the same module objects, so the
same classes). jsonrpcserver's own modules need `oslash.either`; `oslash` is entered the same
way, without the dozen other monads its `__init__` imports. Nothing here names an `oslash` type.

`Error`, `Result` and `Success` are the objects `jsonrpcserver.__all__` exports.
`dispatch_to_serializable` is `jsonrpcserver.main.dispatch_to_serializable` (5.0.x) with the
deserializer and validator always given: the same call of the same dispatch core, with the
same response dicts, and no default jsonschema validator to build.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any, cast


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
_import_without_package_init("jsonrpcserver", ("dispatcher", "response", "result"))

from jsonrpcserver.dispatcher import Deserialized, dispatch_to_response_pure  # noqa: E402
from jsonrpcserver.response import to_serializable_one  # noqa: E402
from jsonrpcserver.result import Error, Result, Success  # noqa: E402
from jsonrpcserver.sentinels import NOCONTEXT  # noqa: E402

__all__ = ["Error", "Result", "Success", "dispatch_to_serializable"]


def dispatch_to_serializable(
    request: Any,
    methods: Mapping[str, Callable[..., Result]],
    *,
    deserializer: Callable[[Any], Deserialized],
    validator: Callable[[Any], object],
) -> dict[str, Any] | list[dict[str, Any]] | None:
    """Dispatch one request (or batch) to `methods`: its response as a dict (a list of them for
    a batch), or None for notifications only. `validator` raises for an invalid request (its
    return value is not used)."""
    # jsonrpcserver's annotations are narrower than what it accepts: any mapping of methods,
    # a validator whose value it ignores, `to_serializable_one` as the post-processor.
    dispatch: Callable[..., Any] = dispatch_to_response_pure
    return cast(
        "dict[str, Any] | list[dict[str, Any]] | None",
        dispatch(
            deserializer=deserializer,
            validator=validator,
            post_process=to_serializable_one,
            context=NOCONTEXT,
            methods=methods,
            request=request,
        ),
    )
