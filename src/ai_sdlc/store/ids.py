"""Story ids, slugs and the validation of anything a user passes as a story reference.

A story id doubles as a folder name, so a reference is checked before it ever becomes a path:
only `S-<digits>` ids and lowercase slugs get through, nothing that could leave the stories
folder (`..`, separators, NUL, absolute paths).
"""

from __future__ import annotations

import re
import unicodedata

from ai_sdlc.errors import UsageError

_ID_REF = re.compile(r"[sS]-([0-9]{1,9})")
_SLUG_REF = re.compile(r"[a-z0-9][a-z0-9-]{0,99}")
_CANONICAL = re.compile(r"S-([0-9]{4,})")
_ARTIFACT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SLUG_MAX = 50


def format_id(number: int) -> str:
    """`S-0007` (four digits minimum, more once past 9999)."""
    return f"S-{number:04d}"


def id_number(name: str) -> int | None:
    """Number of a canonical story folder name (`S-0007` -> 7), else None."""
    match = _CANONICAL.fullmatch(name)
    if match is None:
        return None
    number = int(match.group(1))
    return number if format_id(number) == name else None


def any_id_number(name: str) -> int | None:
    """Number of any `S-<digits>` folder, canonical or not (ids must not collide with them)."""
    match = re.fullmatch(r"S-([0-9]+)", name)
    return int(match.group(1)) if match else None


def _refuse(ref: str, why: str) -> UsageError:
    return UsageError(
        f"{ref!r} is not a story reference: {why}",
        hint="use a story id such as S-0001 (or s-1) or the story's slug",
    )


def parse_ref(ref: str) -> tuple[str | None, str | None]:
    """(canonical id, None) for an id, (None, slug) for a slug; UsageError for anything else."""
    text = ref.strip()
    if not text:
        raise _refuse(ref, "it is empty")
    if "\0" in text or "/" in text or "\\" in text or ".." in text or text.startswith("~"):
        raise _refuse(ref, "it looks like a path")
    id_match = _ID_REF.fullmatch(text)
    if id_match is not None:
        return format_id(int(id_match.group(1))), None
    if _SLUG_REF.fullmatch(text):
        return None, text
    raise _refuse(ref, "ids look like S-0001, slugs use a-z, 0-9 and '-'")


def canonical_id(story_id: str) -> str:
    """Canonical form of a story id given by code or the CLI; UsageError if it is not an id."""
    found, _ = parse_ref(story_id)
    if found is None:
        raise _refuse(story_id, "expected a story id such as S-0001")
    return found


def slugify(title: str) -> str:
    """URL-safe slug as the TypeScript tool makes it (accents folded to ASCII first)."""
    folded = unicodedata.normalize("NFKD", title)
    ascii_text = folded.encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")[:SLUG_MAX].strip("-")
    return slug or "story"


def check_artifact_name(name: str) -> str:
    """`name` if it is a plain file name inside a story folder; UsageError otherwise."""
    if not _ARTIFACT.fullmatch(name) or ".." in name:
        raise UsageError(
            f"{name!r} is not an artifact name",
            hint="use a plain file name such as plan.md (no folders, no '..')",
        )
    return name
