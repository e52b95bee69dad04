"""Real repositories: a worktree and branch per story, commits per attempt, rollback with
patches, pull requests through `gh` (see `ai_sdlc.git.workspace.GitWorkspace`)."""

from ai_sdlc.git.run import GitError, TransientRemoteError
from ai_sdlc.git.settings import GitSettings
from ai_sdlc.git.staging import SecretsInWorkError

__all__ = ["GitError", "GitSettings", "SecretsInWorkError", "TransientRemoteError"]
