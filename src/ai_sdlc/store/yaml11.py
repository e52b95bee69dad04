"""Which unquoted words a YAML 1.1 reader (PyYAML, older tools) would read as something other
than text, so that the renderer quotes them.

Written from the YAML 1.1 type repository (yaml.org/type: bool, int, float, null, timestamp,
merge, value), widened where PyYAML reads more than the spec's patterns (`1._5`, a space before
a timestamp's offset). The spec's own patterns are wider than PyYAML's in two places, kept here
because other YAML 1.1 readers follow them: `y`/`n` are booleans, and `1.2.3` or `10.0.0.1`
match its float pattern. Erring towards "not text" only costs a pair of quotes.
"""

from __future__ import annotations

import re
from functools import cache

#: Every form below starts with one of these characters.
_TYPED_FIRST = frozenset("yYnNtTfFoO~<=+-.0123456789")
_NOT_TEXT = r"""(?:
     y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
    |~|null|Null|NULL|<<|=
    |[-+]?0b[0-1_]+
    |[-+]?0x[0-9a-fA-F_]+
    |[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?(?:[0-9][0-9_]*)?\.[0-9._]*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN)
    |[0-9]{4}-[0-9]{2}-[0-9]{2}
    |[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?
     (?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?
    )\Z"""


def reads_as_text(value: str) -> bool:
    """True when a YAML 1.1 reader would take `value`, written unquoted, as a string."""
    if value[:1] not in _TYPED_FIRST:
        return value != ""
    return _not_text().match(value) is None


@cache
def _not_text() -> re.Pattern[str]:
    return re.compile(_NOT_TEXT, re.X)  # on first use: most words start with other letters
