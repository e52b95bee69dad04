"""Every token shape `secrets.redact` knows, entry by entry: a real-looking token of each
family is masked, and every alternative of the pattern list masks what it matches (examples
generated from the pattern itself, so an alternative cannot be added untested)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_sdlc.secrets import SHAPES, redact

#: One token per family the module promises to mask; removing a family fails its case.
FAMILIES = {
    "openai": "sk-proj-AbCdEfGhIjKlMnOp1234",
    "anthropic": "sk-ant-api03-AbCdEfGhIjKl-5678",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "x-api-key": "x-api-key: 0123456789abcdef",
    "github classic": "ghp_AbCdEfGhIjKlMnOpQrStUv0123456789",
    "github oauth": "gho_AbCdEfGhIjKlMnOpQrSt0123",
    "github fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "slack": "xoxb-1234567890-abcdefghij",
    "aws access key id": "AKIAIOSFODNN7EXAMPLE",
}
ALTERNATIVES = SHAPES


@pytest.mark.parametrize("token", FAMILIES.values(), ids=FAMILIES.keys())
def test_each_token_family_is_masked(token: str) -> None:
    text = f"printed: {token} (end)"
    out = redact(text, environ={})
    assert token not in out
    assert out.startswith("printed: ") and out.endswith(" (end)")


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_every_alternative_masks_what_it_matches(alternative: str) -> None:
    @settings(max_examples=25)
    @given(st.from_regex(alternative, fullmatch=True).filter(lambda s: s.strip() == s))
    def masked(token: str) -> None:
        assert token not in redact(f"x {token} y", environ={})

    masked()
