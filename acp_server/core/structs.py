"""The msgspec struct bases of the session model, and its JSON-safe integers.

Every struct of the model (content blocks, stream chunks, event payloads, events) derives from
`Model` or, in a union tagged by `type`, from `Tagged`: camelCase keys, absent optionals
omitted, unknown keys refused (a log must round-trip losslessly, so a record the model cannot
represent exactly is refused rather than silently trimmed).

Structs are created with `gc=False`: events never form reference cycles, and long logs hold
hundreds of thousands of them, which would otherwise keep the cycle collector busy.
"""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta, Struct

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Seqs and times must survive a trip through a JavaScript number."""

SafeInt = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
Seq = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]

# ---------------------------------------------------------------------------------------------
# Shared struct configurations.


class Model(Struct, rename="camel", omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """Base of every payload struct: camelCase keys, absent optionals omitted, strict keys."""


class Tagged(
    Model, tag_field="type", rename="camel", omit_defaults=True, forbid_unknown_fields=True
):
    """Base of every struct in a union tagged by `type`."""
