"""Small English helpers for messages: counts with the right plural, the right article.

Every message that says "N things" or "a thing" goes through these, so none says "1 stories"
or "a implementation retry"."""

from __future__ import annotations

#: Irregular plurals of the nouns our messages count.
_PLURALS = {"story": "stories", "retry": "retries", "entry": "entries", "was": "were"}


def plural(word: str, count: int) -> str:
    """`word` for `count` of them: story/stories, attempt/attempts."""
    if count == 1:
        return word
    return _PLURALS.get(word, word + "s")


def count(number: int, word: str) -> str:
    """ "1 story", "2 stories", "0 attempts"."""
    return f"{number} {plural(word, number)}"


def article(phrase: str) -> str:
    """`phrase` with "a" or "an" in front, by its first letter's sound (good enough for the
    words we use: "an implementation retry", "a rework", "an API retry")."""
    first = phrase.lstrip()[:1].lower()
    upper_initialism = phrase.split(" ", 1)[0].isupper() and len(phrase.split(" ", 1)[0]) > 1
    vowel_sound = first in "aeiou" or (upper_initialism and first in "aefhilmnorsx")
    return f"{'an' if vowel_sound else 'a'} {phrase}"
