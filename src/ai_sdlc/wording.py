"""Small English helpers for messages: counts with the right plural, the right article.

Every message that says "N things" or "a thing" goes through these, so none says "1 stories"
or "a implementation retry"."""

from __future__ import annotations

#: Irregular plurals of the nouns our messages count.
_PLURALS = {"story": "stories", "retry": "retries", "entry": "entries", "was": "were"}


def plural(word: str, count: int) -> str:
    """`word` for `count` of them: story/stories, attempt/attempts; of a phrase, its last
    word ("finished story" → "finished stories")."""
    if count == 1:
        return word
    head, space, last = word.rpartition(" ")
    return head + space + _PLURALS.get(last, last + "s")


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


def attempt_label(attempt: object, step: object = None, of: object = None) -> str:
    """An attempt as the console, the report and the commit trailer name it: the phase's
    attempt number (the ledger's, `AI-SDLC-Attempt: N`) and, for a phase with a retry limit,
    its budget ("attempt 3 · retries 2/3"). `step` of `of` counts within the limit: a plain
    `unblock` leaves it spent, and the label says the next failure blocks."""
    if attempt is None:  # recorded before the attempt number was kept
        attempt = step
    if not isinstance(of, int) or isinstance(of, bool) or not of:
        return f"attempt {attempt}"
    used, limit = (step if isinstance(step, int) else 1) - 1, of - 1
    if used > limit:
        spent = f"retries spent ({used}/{limit}, unblocked)"
        return f"attempt {attempt} · {spent}: the next failure blocks"
    return f"attempt {attempt} · retries {used}/{limit}"
