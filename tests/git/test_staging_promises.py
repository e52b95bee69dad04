"""A commit never carries the value of a credential-named environment variable: a file holding
`$MY_SERVICE_PASSWORD`'s value (no known token shape) is refused like a `.env` file, and the
refusal names the file without the value."""

from __future__ import annotations

import pytest

from ai_sdlc.git.staging import SecretsInWorkError
from ai_sdlc.git.workspace import GitWorkspace
from tests.support.git_support import Repo, git, git_env, prepared, repo

__all__ = ["git_env", "repo"]  # fixtures

VALUE = "plain-words-but-a-password-1234"


def test_a_file_holding_a_credential_variables_value_is_not_committed(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", VALUE)
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "settings.py").write_text(f"CONNECT = {VALUE!r}\n")
    head = git(path, "rev-parse", "HEAD")

    with pytest.raises(SecretsInWorkError) as caught:
        ws.attempt_passed(story, path, attempt=1)

    assert caught.value.paths == ["settings.py"]
    assert "settings.py (credential-like content)" in str(caught.value)
    assert VALUE not in str(caught.value)
    assert git(path, "rev-parse", "HEAD") == head


def test_the_same_file_without_the_variable_is_committed(repo: Repo) -> None:
    """The check above is about the variable, not the text: without it the file is ordinary."""
    sid = repo.story()
    ws = GitWorkspace(repo.root)
    story, path = prepared(repo, ws, sid)
    (path / "settings.py").write_text(f"CONNECT = {VALUE!r}\n")
    ws.attempt_passed(story, path, attempt=1)
    assert "settings.py" in git(path, "show", "--name-only", "--format=", "HEAD")
