"""Private state homes and caches for sandboxed children, inside ai-sdlc's own state folder.

A child may write its tool state somewhere, but never where the user's own, unconfined tools
read it back: a `hooks` command in `~/.claude/settings.json`, a `notify` program in
`~/.codex/config.toml`, an `mcpServers` command in `~/.gemini/settings.json`, a package in
`~/.npm/_npx` or `~/.cache/pip` would run later as the user, and uv hard-links installed code
from `~/.cache/uv`, so a writable cache is writable installed code (issue 32). So every child
gets (in its environment, overriding the user's values):

- a private home per workspace (`<state>/homes/<hash of the workspace>/`): CLAUDE_CONFIG_DIR,
  CODEX_HOME, GEMINI_CLI_HOME, the XDG config/data/state homes (the user's `~/.config` stays
  readable through XDG_CONFIG_DIRS, so pip's and uv's own settings still apply), and the folder
  the command presets hand their CLI (`runs/`: prompt, history and output files);
- caches shared by every story of every project for speed (`<state>/caches/`): XDG_CACHE_HOME,
  npm, uv (copying, never hard-linking: see `links`), pip, pre-commit, Go and Cargo.

`<state>` is the user's ai-sdlc state folder (`statehome.user_state_dir`), outside the project
(whose `.ai-sdlc/` children must not write) and read by nothing the user runs unconfined.
Logins are seeded by copying the user's credential files in (a refreshed token stays in the
copy; the user's file is copied again only when it is newer), or passed by environment (API
keys); the user's real folders are never writable. Cargo's settings are made the user's again
before every child: a `runner` a child left in the shared cache would run every `cargo test`.
A private Codex `config.toml` is the user's with `request_max_retries = 0` and
`stream_max_retries = 0` on every provider (`codexconf`), so each refused request is one
ai-sdlc counts and retries under its `llm` policy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import msgspec

from ai_sdlc.errors import AiSdlcError
from ai_sdlc.sandbox.codexconf import private_codex_config
from ai_sdlc.statehome import user_state_dir

#: Variable → folder inside the workspace's private home.
HOME_VARS: tuple[tuple[str, str], ...] = (
    ("CLAUDE_CONFIG_DIR", "claude"),
    ("CODEX_HOME", "codex"),
    ("GEMINI_CLI_HOME", "gemini"),
    ("XDG_CONFIG_HOME", "xdg/config"),
    ("XDG_DATA_HOME", "xdg/data"),
    ("XDG_STATE_HOME", "xdg/state"),
)
#: Variable → folder inside the shared caches.
CACHE_VARS: tuple[tuple[str, str], ...] = (
    ("XDG_CACHE_HOME", "xdg"),
    ("npm_config_cache", "npm"),
    ("UV_CACHE_DIR", "uv"),
    ("PIP_CACHE_DIR", "pip"),
    ("PRE_COMMIT_HOME", "pre-commit"),
    ("GOCACHE", "go-build"),
    ("GOMODCACHE", "go-mod"),
    ("CARGO_HOME", "cargo"),
)
#: uv installs by hard-linking from its cache: copies keep a worktree's venv free of links to
#: anything outside it (the hard-link check would refuse them).
FIXED_VARS: tuple[tuple[str, str], ...] = (("UV_LINK_MODE", "copy"),)
#: Where the command presets put their prompt and output folders (inside the private home).
RUNS = "runs"
#: Login and settings files copied from the user's folders: (source folder key, name, target
#: folder inside the private home).
_SEEDS: tuple[tuple[str, str, str], ...] = (
    ("claude", ".credentials.json", "claude"),
    ("claude", "settings.json", "claude"),
    ("claude_json", ".claude.json", "claude"),
    ("codex", "auth.json", "codex"),
    ("gemini", "oauth_creds.json", "gemini/.gemini"),
    ("gemini", "google_accounts.json", "gemini/.gemini"),
    ("gemini", "settings.json", "gemini/.gemini"),
    ("gemini", "trustedFolders.json", "gemini/.gemini"),
    ("gemini", "installation_id", "gemini/.gemini"),
    ("gemini", ".env", "gemini/.gemini"),
)
#: Cargo's settings (a registry mirror, say); never its credentials. Kept exactly the user's
#: before every child (`_settle`): `CARGO_HOME` is a cache every story shares and children
#: write, and a `runner` or `rustc-wrapper` left there would decide every later `cargo test`.
_CARGO_SEEDS = ("config.toml", "config")


class HomeSources(msgspec.Struct, frozen=True):
    """Where the user's own tool folders are: read (login files copied), never written."""

    state: str
    claude: str
    claude_json: str
    codex: str
    gemini: str
    cargo: str
    config_dirs: str

    @classmethod
    def from_env(cls, env: Mapping[str, str], home: Path) -> HomeSources:
        claude_dir = env.get("CLAUDE_CONFIG_DIR") or str(home / ".claude")
        # The folder holding Claude Code's `.claude.json` (yours: your CLAUDE_CONFIG_DIR or ~).
        claude_json = claude_dir if env.get("CLAUDE_CONFIG_DIR") else str(home)
        gemini_home = env.get("GEMINI_CLI_HOME") or str(home)
        user_config = env.get("XDG_CONFIG_HOME") or str(home / ".config")
        dirs = [user_config, *(env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep)]
        return cls(
            state=str(user_state_dir(env)),
            claude=claude_dir,
            claude_json=claude_json,
            codex=env.get("CODEX_HOME") or str(home / ".codex"),
            gemini=str(Path(gemini_home) / ".gemini"),
            cargo=env.get("CARGO_HOME") or str(home / ".cargo"),
            config_dirs=os.pathsep.join(d for d in dirs if d),
        )

    @property
    def homes(self) -> Path:
        return Path(self.state, "homes")

    @property
    def caches(self) -> Path:
        return Path(self.state, "caches")

    def logins(self) -> list[str]:
        """The user's own login files (no child may read them: `policy.DENY_READ`); the
        private homes' copies stay readable to their agent."""
        return [
            str(Path(self.claude, ".credentials.json")),
            str(Path(self.claude_json, ".claude.json")),
            str(Path(self.codex, "auth.json")),
            str(Path(self.gemini, "oauth_creds.json")),
            str(Path(self.gemini, "google_accounts.json")),
        ]

    def folder(self, key: str) -> str:
        value: str = getattr(self, key)
        return value


class PrivateHomes(msgspec.Struct, frozen=True):
    """One workspace's private home and the shared caches: their variables and roots."""

    home: str
    caches: str
    env: tuple[tuple[str, str], ...]

    @property
    def writable(self) -> tuple[str, str]:
        return (self.home, self.caches)

    @property
    def runs(self) -> str:
        return os.path.join(self.home, RUNS)


def home_of(sources: HomeSources, workspace: Path) -> Path:
    """The private home of `workspace` (one per story worktree, or per project in place)."""
    real = os.path.realpath(workspace)
    key = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return sources.homes / key


def prepare(sources: HomeSources, workspace: Path) -> PrivateHomes:
    """Create (or bring up to date) the private home of `workspace` and the shared caches:
    folders, copied logins, the private Codex config. Cheap when already there."""
    home = home_of(sources, workspace)
    caches = sources.caches
    env: list[tuple[str, str]] = []
    try:
        for name, rel in HOME_VARS:
            env.append((name, _folder(home / rel)))
        for name, rel in CACHE_VARS:
            env.append((name, _folder(caches / rel)))
        _folder(home / "gemini" / ".gemini")
        _folder(home / RUNS)
        env.append(("XDG_CONFIG_DIRS", sources.config_dirs))
        env.extend(FIXED_VARS)
        for key, name, target in _SEEDS:
            _seed(Path(sources.folder(key), name), home / target / name)
        for name in _CARGO_SEEDS:
            _settle(Path(sources.cargo, name), caches / "cargo" / name)
        codex = private_codex_config(Path(sources.codex) / "config.toml")
        _write_if_changed(home / "codex" / "config.toml", codex)
    except OSError as exc:
        raise AiSdlcError(
            f"cannot prepare the agents' private home {home}: {exc.strerror or exc}",
            hint=f"make {sources.state} writable, or set AI_SDLC_STATE_HOME to a writable "
            "folder (ai-sdlc keeps the agents' homes and caches there)",
        ) from None
    return PrivateHomes(os.path.realpath(home), os.path.realpath(caches), tuple(env))


def _folder(path: Path) -> str:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(path)


def _seed(source: Path, target: Path) -> None:
    """Copy a login/settings file when the user's is newer than the copy (or the copy is
    missing); a regular file only (a link or folder there is not the user's login)."""
    try:
        if not source.is_file() or source.is_symlink():
            return
        mtime = source.stat().st_mtime_ns
    except OSError:
        return
    try:
        if target.is_symlink() or not target.is_file():
            if target.is_symlink() or target.exists():
                _remove(target)
        elif target.stat().st_mtime_ns >= mtime:
            return
    except OSError:
        return
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copy2(source, target)
    os.chmod(target, 0o600)


def _settle(source: Path, target: Path) -> None:
    """Make `target` the user's settings file `source` again: copied when its bytes differ,
    removed when the user has none (a regular file only counts as the user's)."""
    try:
        wanted = source.read_bytes() if source.is_file() and not source.is_symlink() else None
    except OSError:
        wanted = None
    try:
        if target.is_symlink() or target.is_dir():
            _remove(target)
        elif target.is_file() and wanted is not None and target.read_bytes() == wanted:
            return
        if wanted is None:
            target.unlink(missing_ok=True)
            return
    except OSError:
        return
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copy2(source, target)
    os.chmod(target, 0o600)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _write_if_changed(path: Path, text: str) -> None:
    data = text.encode()
    try:
        if not path.is_symlink() and path.read_bytes() == data:
            return
    except OSError:
        pass
    if path.is_symlink() or path.is_dir():
        _remove(path)
    from ai_sdlc.fsutil import atomic_write_bytes

    atomic_write_bytes(path, data)
