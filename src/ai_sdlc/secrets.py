"""Keep secrets out of everything we write or print.

Two nets: the values of environment variables whose names look like credentials (any value the
user has in `GITHUB_TOKEN`, `MY_SERVICE_PASSWORD`, ... that shows up in a command's output), and
well-known token shapes (OpenAI/Anthropic `sk-`, GitHub `ghp_`/`github_pat_`, Slack `xox?-`, AWS
access key ids, `Bearer ...`), plus URLs: the `user:password@` part and credential-looking
query parameters (`?api_key=`, `token=`, `sig=`, ...) are masked wherever a URL appears. Story
files, event logs, run state and error messages pass through `redact`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ai_sdlc.environ import current as current_environ

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)

#: The token shapes, one alternative each; every one starts with a letter (see SECRET_SHAPES).
SHAPES: tuple[str, ...] = (
    r"sk-[A-Za-z0-9_\-]{8,}",
    r"Bearer\s+[A-Za-z0-9._\-]{8,}",
    r"x-api-key:\s*\S{8,}",
    r"gh[pousr]_[A-Za-z0-9]{16,}",
    r"github_pat_[A-Za-z0-9_]{16,}",
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",
    r"AKIA[0-9A-Z]{16}",
)

#: Any of SHAPES. The look-ahead for their first letters lets the engine skip every other
#: position at once: every state file and event is redacted whole, and trying each alternative
#: at each character cost ~70 ns a character (a 60-story run's state.json, 2 ms a save).
SECRET_SHAPES = re.compile(
    "(?=[" + "".join(sorted({shape[0] for shape in SHAPES})) + "])(?:" + "|".join(SHAPES) + ")",
    re.IGNORECASE,
)

#: Query parameter names whose value is a credential (`api_key`, `access_token`, `X-Amz-Signature`).
SECRET_PARAM = re.compile(
    r"key|token|secret|pass(?:word|wd)?|pwd|sig|auth|credential|session", re.IGNORECASE
)
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`]*[^\s\"'<>`.,;:)\]}]")
_QUERY_PAIR = re.compile(r"([?&;])([^=&;#]*)=([^&;#]*)")

#: Values shorter than this are not treated as secrets (too likely to be ordinary words).
MIN_SECRET_LENGTH = 8
MASK = "***"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of credential-like environment variables, longest first."""
    if environ is not None:
        return _secret_values(environ)
    global _process_secrets
    # Every `redact` asks, dozens of times a run: matching every name each time cost ~1 ms.
    # The answer is kept for as long as the environment's copy is the same object.
    env = current_environ()
    cached = _process_secrets
    if cached is None or cached[0] is not env:
        cached = _process_secrets = (env, _secret_values(env))
    return list(cached[1])


def _secret_values(source: Mapping[str, str]) -> list[str]:
    values = {v for k, v in source.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


#: (the environment copy they were read from, its secret values).
_process_secrets: tuple[Mapping[str, str], list[str]] | None = None


def scrubbed_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment minus anything whose name looks like a credential."""
    source = current_environ() if environ is None else environ
    return {k: v for k, v in source.items() if not is_secret_name(k)}


def mask_url(url: str) -> str:
    """`url` with its `user:password@` part and every credential-looking query value masked."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = len(rest)
    for mark in "/?#":
        found = rest.find(mark)
        if 0 <= found < cut:
            cut = found
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        authority = MASK + "@" + authority.rpartition("@")[2]

    def pair(match: re.Match[str]) -> str:
        sep_char, name, value = match.groups()
        if value and SECRET_PARAM.search(name):
            return f"{sep_char}{name}={MASK}"
        return match.group(0)

    return f"{scheme}://{authority}{_QUERY_PAIR.sub(pair, tail)}"


def mask_urls(text: str) -> str:
    """`text` with `mask_url` applied to every URL in it."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: mask_url(m.group(0)), text)


def redact_title(title: object) -> str:
    """A story title as it may leave the story file (commit subject, PR title and body, branch
    and worktree name, report): one line, with the redaction the PR body gets."""
    return redact(" ".join(str(title or "").split()))


def redact_tree(value: object) -> object:
    """`value` (JSON-like data) with every string in it redacted (keys left as they are)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v) for v in value]
    return value


def redact(
    text: str, secrets: Iterable[str] = (), *, environ: Mapping[str, str] | None = None
) -> str:
    """`text` with known secrets (given ones and the environment's), URL credentials and token
    shapes masked."""
    for secret in (*secrets, *secret_values(environ)):
        if secret and len(secret) >= 6 and secret in text:
            text = text.replace(secret, MASK)
    return SECRET_SHAPES.sub(MASK, mask_urls(text))
