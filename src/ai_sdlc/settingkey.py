"""`key(...)`: the metadata of one config key, shared by the config models and the providers'
own settings models (a base module, so either may import it without importing the other)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

#: How a key is guarded (config.guard, config.layers): "accept": a change waits for a person's
#: `config --accept`; "strict": that, and the environment or the user's file may only make it
#: stricter. Marked on a key, or on a section for all its keys.
Guard = Literal["", "accept", "strict"]


def guarded(level: Guard) -> msgspec.Meta:
    """The guard of every key of a section (`Annotated[LimitsSection, guarded("strict")]`)."""
    return msgspec.Meta(extra={"guard": level})


def key(
    doc: str,
    *,
    expected: str | None = None,
    check: str | None = None,
    type_name: str | None = None,
    materialize: bool = True,
    guard: Guard = "",
) -> msgspec.Meta:
    """The metadata of one key: `doc` its meaning (for docs/configuration.md); `check` a name
    in `config.fields.CHECKS` (what a type cannot say); `expected` the words for messages when
    those generated from the type read badly; `materialize` False for keys that stay absent
    from the effective config until a file sets them (their owner applies its own default);
    `guard` how a change of it is guarded (see `Guard`)."""
    extra: dict[str, Any] = {"materialize": materialize}
    if guard:
        extra["guard"] = guard
    if expected:
        extra["expected"] = expected
    if check:
        extra["check"] = check
    if type_name:
        extra["type"] = type_name
    return msgspec.Meta(description=doc, extra=extra)
