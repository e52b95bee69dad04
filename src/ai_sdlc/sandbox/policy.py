"""What a sandboxed child may write, built from the project's config, and how it is launched.

Writable: the story's workspace (its worktree), a private temp folder per child (TMPDIR, TMP
and TEMP point at it), the workspace's private home and the shared caches in ai-sdlc's own
state folder (`homes`: the agent CLIs' state, XDG homes, npm/uv/pip/Go/Cargo caches, pointed
at by variables that override the user's), `/dev/null` and `/dev/shm`, and the folders listed
in `sandbox.writable`. Everything else is read-only, notably the main checkout, its
`.ai-sdlc/` (stories, ledger, config), the repository's git folder and the user's own tool
folders (`~/.claude`, `~/.codex`, `~/.gemini`, `~/.cache`, `~/.npm`): Landlock rules allow by
hierarchy, so a worktree inside the main checkout (`.ai-sdlc/worktrees/<id>`) is writable while
its parents are not. Before the first child of a workspace, `links.check` refuses a writable
root holding a hard link to a file outside the writable set.

Readable: everything but the credential stores of `DENY_READ` and `sandbox.deny_read` (see
`landlock.readable_roots`). Network: `for_step` closes TCP for the steps `sandbox.network`
does not name (by default verification and the agent loop's `run_command` get none,
`worktree.setup` keeps it, CLI agents reach their API hosts only, through `proxy`), where the
kernel has Landlock network rules (ABI 4).

`sandbox_policy_for(workspace, config)` is the one call a caller needs: the policy (or None
when the sandbox is off or unavailable) to pass as `start_session(..., sandbox=policy)`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import msgspec

from ai_sdlc.errors import AiSdlcError, ExitCode, InvalidInputError
from ai_sdlc.sandbox import homes
from ai_sdlc.sandbox.backend import SANDBOX_ENV, Availability, Backend, select_backend
from ai_sdlc.sandbox.homes import HomeSources

#: Devices and shared memory every program may write: the bit bucket, and POSIX semaphores and
#: shared memory (Python's multiprocessing locks live in /dev/shm).
SYSTEM_WRITABLE: tuple[str, ...] = ("/dev/null", "/dev/shm")
TEMP_VARS = ("TMPDIR", "TMP", "TEMP")
#: Credential stores no child may read (`~` is $HOME; missing ones are skipped), before
#: `sandbox.deny_read`: keys, cloud and cluster logins, registry and git tokens, and the agent
#: CLIs' own login files (a CLI gets its key by environment or a private home instead).
DENY_READ: tuple[str, ...] = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/gh",
    "~/.pypirc",
    "~/.npmrc",
    "~/.claude.json",
    "~/.claude/.credentials.json",
    "~/.codex/auth.json",
    "~/.gemini/oauth_creds.json",
    "~/.gemini/google_accounts.json",
)
#: The kinds of step `sandbox.network` names: verification commands, the agent loop's
#: `run_command` tool, `worktree.setup` commands and CLI agents.
NETWORK_STEPS: tuple[str, ...] = ("verify", "tools", "setup", "agents")
#: The steps that keep the network by default (package registries, the provider's API).
DEFAULT_NETWORK: tuple[str, ...] = ("setup",)


class SandboxRequiredError(AiSdlcError):
    """An unattended run was asked for where no sandbox can be applied."""

    exit_code = ExitCode.FAILURE


class Launch(msgspec.Struct, frozen=True):
    """A command line ready for `Popen`: the wrapped argv, its environment, its temp folder."""

    argv: list[str]
    env: dict[str, str]
    tmpdir: str


class SandboxPolicy(msgspec.Struct, frozen=True):
    """The writable roots of one workspace's children, and the backend that enforces them."""

    backend: Backend
    writable: tuple[str, ...]
    #: Variables set in every sandboxed child's environment, over the caller's (the private
    #: homes and caches: CLAUDE_CONFIG_DIR, CODEX_HOME, XDG_CACHE_HOME…).
    env: tuple[tuple[str, str], ...] = ()
    #: A writable folder for what a caller hands its child (prompt and output files), or "".
    runs: str = ""
    #: Paths no child may read (resolved; see `landlock.readable_roots`).
    deny_read: tuple[str, ...] = ()
    #: The TCP ports a child may connect to; None: the network is open.
    connect_ports: tuple[int, ...] | None = None
    #: The steps that keep the network (`sandbox.network`), and whether the kernel can close
    #: it for the others (Landlock ABI 4).
    network: tuple[str, ...] = DEFAULT_NETWORK
    net_rules: bool = False
    #: Credential variables agents get besides their provider's key (`sandbox.pass_env`).
    pass_env: tuple[str, ...] = ()
    #: Run each child in a PID namespace of its own (no `/proc/<ancestor>/environ`).
    pidns: bool = True
    #: Paths inside the writable roots no child may change (the worktree's `.git` pointer):
    #: bound read-only in the child's mount namespace, where it has one (`pidns`).
    read_only: tuple[str, ...] = ()

    def for_step(self, step: str) -> SandboxPolicy:
        """This policy for one kind of step (`NETWORK_STEPS`): no TCP at all unless
        `sandbox.network` names the step (or the kernel cannot close it: doctor says so)."""
        if step in self.network or not self.net_rules:
            return self
        return msgspec.structs.replace(self, connect_ports=())

    def launch(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        cwd: Any = None,
        lifeline: int | None = None,
    ) -> Launch:
        """Resolve the program (as `Popen` would: FileNotFoundError/PermissionError when it
        cannot run), make the child's private temp folder and wrap the command line
        (`lifeline`: see `Backend.wrap`)."""
        import tempfile  # (a run that starts no child never imports it)

        from ai_sdlc.environ import current
        from ai_sdlc.fsutil import remove_tree

        environment = dict(current() if env is None else env)
        executable = resolve_executable(argv[0], environment, cwd)
        tmpdir = tempfile.mkdtemp(prefix="ai-sdlc-tmp-")
        try:
            for name in TEMP_VARS:
                environment[name] = tmpdir
            environment.update(self.env)
            wrapped = self.backend.wrap(
                [executable, *argv],
                (*self.writable, tmpdir),
                lifeline=lifeline,
                deny_read=self.deny_read,
                connect_ports=self.connect_ports,
                pidns=self.pidns,
                read_only=self.read_only,
            )
        except BaseException:
            remove_tree(tmpdir)
            raise
        return Launch(wrapped, environment, tmpdir)


def resolve_executable(program: str, env: Mapping[str, str], cwd: Any = None) -> str:
    """The file `execvpe(program)` would run with `env`'s PATH (from `cwd` for a relative
    path with a slash), or the error `Popen` raises when there is none."""
    import shutil

    if os.sep in program:
        path = program if os.path.isabs(program) or cwd is None else os.path.join(cwd, program)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return os.path.abspath(path)
    found = shutil.which(program, path=os.pathsep.join(os.get_exec_path(dict(env))))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return os.path.abspath(found)


class SandboxKeys(Protocol):
    """What is read of the typed `sandbox` section (`config.sections.SandboxSection`: the
    sandbox sits below config, so it names the fields it reads instead of importing it)."""

    @property
    def enabled(self) -> bool: ...
    @property
    def required(self) -> bool: ...
    @property
    def writable(self) -> list[str]: ...
    @property
    def deny_read(self) -> list[str]: ...
    @property
    def network(self) -> list[str]: ...
    @property
    def pass_env(self) -> list[str]: ...


class _TypedSections(Protocol):
    @property
    def sandbox(self) -> SandboxKeys: ...


class TypedConfig(Protocol):
    """A `config.Config`: its settings as the typed models."""

    def typed(self) -> _TypedSections: ...


class SandboxSettings(msgspec.Struct, frozen=True):
    """The `sandbox` config section."""

    enabled: bool = True
    required: bool = True
    writable: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    network: tuple[str, ...] = DEFAULT_NETWORK
    pass_env: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: TypedConfig) -> SandboxSettings:
        section = config.typed().sandbox
        return cls(
            enabled=section.enabled,
            required=section.required,
            writable=tuple(section.writable),
            deny_read=tuple(section.deny_read),
            network=tuple(section.network),
            pass_env=tuple(section.pass_env),
        )


class Sandbox(msgspec.Struct, frozen=True):
    """The sandbox of a session: settings, backend, and the roots common to every workspace."""

    settings: SandboxSettings
    backend: Backend
    availability: Availability
    #: Where the private homes and caches live, and the user's folders they are seeded from.
    sources: HomeSources
    #: Writable roots besides the workspace, its home and the temp folder (existing, resolved).
    shared: tuple[str, ...] = ()
    #: `sandbox.writable` folders that hold the project (the user's choice; doctor warns).
    exposing: tuple[str, ...] = ()
    #: The project's real path (its private homes must not hold it).
    project: str = ""
    #: The paths no child may read (`DENY_READ` and `sandbox.deny_read`, expanded).
    deny_read: tuple[str, ...] = ()
    #: The folders `sandbox.writable` adds (resolved, in its order): a wider sandbox is a looser
    #: one, so `doctor` and the first line of a run name each.
    widened: tuple[str, ...] = ()

    @classmethod
    def from_config(
        cls, config: Any, *, root: Path, environ: Mapping[str, str] | None = None
    ) -> Sandbox:
        """Raises InvalidInputError when a `sandbox.writable` folder does not exist."""
        from ai_sdlc.environ import current, home_folder

        env = current() if environ is None else environ
        settings = SandboxSettings.from_config(config)
        backend = select_backend(env)
        home = Path(home_folder(env))
        shared: list[str] = [p for p in SYSTEM_WRITABLE if os.path.exists(p)]
        exposing: list[str] = []
        widened: list[str] = []
        project = Path(os.path.realpath(root))
        for raw in settings.writable:
            path = _expand(raw, home)
            if not path.is_absolute():
                path = root / path
            if not path.exists():
                raise InvalidInputError(
                    f"config key sandbox.writable: {raw!r} does not exist ({path})",
                    hint="create the folder, or remove it from sandbox.writable",
                )
            shared.append(os.path.realpath(path))
            widened.append(os.path.realpath(path))
            if project.is_relative_to(os.path.realpath(path)):
                exposing.append(raw)
        sources = HomeSources.from_env(env, home)
        deny = [str(_expand(raw, home)) for raw in DENY_READ]
        deny += sources.logins()  # where CLAUDE_CONFIG_DIR, CODEX_HOME... put them
        for raw in settings.deny_read:
            path = _expand(raw, home)
            deny.append(str(path if path.is_absolute() else root / path))
        return cls(
            settings,
            backend,
            backend.available(),
            sources,
            tuple(dict.fromkeys(shared)),
            tuple(exposing),
            str(project),
            tuple(dict.fromkeys(deny)),
            tuple(dict.fromkeys(widened)),
        )

    @property
    def in_force(self) -> bool:
        return self.settings.enabled and self.availability.usable

    def private_roots(self) -> tuple[str, str]:
        """Where the private homes and the shared caches are kept (not yet created)."""
        return (str(self.sources.homes), str(self.sources.caches))

    def writable_roots(self, workspace: Path) -> tuple[str, ...]:
        """The workspace and the shared roots (its private home and caches are added by
        `policy_for`, which creates them)."""
        return (os.path.realpath(workspace), *self.shared)

    def policy_for(self, workspace: Path) -> SandboxPolicy | None:
        """The policy of `workspace`'s children; None when the sandbox is off or missing.
        Creates the workspace's private home and the caches (AiSdlcError when it cannot)."""
        if not self.in_force:
            return None
        for root in self.private_roots():
            real = os.path.realpath(root)
            if Path(self.project).is_relative_to(real):
                raise InvalidInputError(
                    f"the agents' private homes and caches ({real}) would hold this project "
                    f"({self.project}): children could write its ledger and config",
                    hint="set AI_SDLC_STATE_HOME to a folder outside the project",
                )
        private = homes.prepare(self.sources, workspace)
        return SandboxPolicy(
            self.backend,
            (os.path.realpath(workspace), *private.writable, *self.shared),
            private.env,
            private.runs,
            self.private_deny(),
            network=self.settings.network,
            net_rules=self.net_rules,
            pass_env=self.settings.pass_env,
            read_only=git_pointer(workspace),
        )

    def private_deny(self) -> tuple[str, ...]:
        """The deny-list without what lies inside the private homes and caches: those are
        ai-sdlc's copies of the logins, which the agents' CLIs must read (the user's own
        files stay denied)."""
        private = [Path(os.path.realpath(root)) for root in self.private_roots()]
        return tuple(
            path
            for path in self.deny_read
            if not any(Path(os.path.realpath(path)).is_relative_to(root) for root in private)
        )

    def check_links(self, workspace: Path) -> None:
        """Refuse (links.HardLinkError) a writable root holding a hard link to a file outside
        the writable set; call once per workspace, before its first child (`links`)."""
        if not self.in_force:
            return
        from ai_sdlc.sandbox import links

        system = {os.path.realpath(p) for p in SYSTEM_WRITABLE}
        extra = [p for p in self.shared if p not in system]
        private = [str(homes.home_of(self.sources, workspace)), str(self.sources.caches)]
        links.check(workspace, extra, [os.path.realpath(p) for p in private], Path(self.project))

    @property
    def net_rules(self) -> bool:
        """Whether the kernel can close the network for a step (Landlock ABI 4)."""
        from ai_sdlc.sandbox.landlock import NET_ABI

        return (self.availability.abi or 0) >= NET_ABI

    def missing_reason(self, *, no_sandbox: bool = False) -> str | None:
        """Why children will run unconfined although the config wants a sandbox (None when
        one is in force, or when it was turned off on purpose: `--no-sandbox`, enabled:
        false); also when the kernel cannot close the network `sandbox.network` closes."""
        if no_sandbox or not self.settings.enabled:
            return None
        if not self.availability.usable:
            return self.availability.detail
        closed = [s for s in NETWORK_STEPS if s not in self.settings.network]
        if closed and not self.net_rules:
            return (
                f"Landlock ABI {self.availability.abi} has no network rules (ABI 4, Linux 6.7): "
                f"{', '.join(closed)} keep the open network"
            )
        return None

    def network_rules(self) -> dict[str, str]:
        """Each kind of step and the network it gets (for doctor)."""
        rules: dict[str, str] = {}
        for step in NETWORK_STEPS:
            if step in self.settings.network:
                rules[step] = "open (sandbox.network)" if step != "setup" else "open"
            elif not self.net_rules:
                rules[step] = "open: the kernel has no Landlock network rules"
            elif step == "agents":
                rules[step] = "their API hosts only, through ai-sdlc's proxy"
            else:
                rules[step] = "none (no TCP)"
        return rules

    def pid_namespace(self) -> str | None:
        """None when a child runs in a PID namespace of its own here (it cannot read
        `/proc/<ancestor>/environ`), else why not (a child is started to find out)."""
        import subprocess
        import sys

        if not self.in_force:
            return "no sandbox"
        policy = SandboxPolicy(self.backend, ())
        code = "import os; print(os.getpid(), os.readlink('/proc/self'))"
        launch = policy.launch([sys.executable, "-I", "-S", "-c", code], env={})
        try:
            done = subprocess.run(launch.argv, env=launch.env, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"the probe did not run ({exc})"
        finally:
            from ai_sdlc.fsutil import remove_tree

            remove_tree(launch.tmpdir)
        if done.stdout.split() == [b"2", b"2"]:
            return None
        if done.stdout.startswith(b"2 "):
            return "a PID namespace, but /proc could not be mounted in it (a masked /proc?)"
        return "the kernel refused a new PID namespace (user namespaces turned off?)"

    def check_unattended(self, *, no_sandbox: bool, command: str) -> None:
        """`run --auto` and `watch` refuse to start without a sandbox unless told."""
        reason = self.missing_reason(no_sandbox=no_sandbox)
        if reason is None or not self.settings.required:
            return
        raise SandboxRequiredError(
            f"no sandbox is available ({reason}): {command} would let agents and verification "
            "commands write anywhere you can (the ledger, the config, the git folder)",
            hint=f"run it where Landlock works (Linux 5.13+; `ai-sdlc doctor` shows why), or "
            f"accept the risk: {command} --no-sandbox, or sandbox.required: false"
            + (f" (and unset {SANDBOX_ENV})" if SANDBOX_ENV in reason else ""),
        )


def _expand(raw: str, home: Path) -> Path:
    if raw == "~" or raw.startswith("~/"):
        return home / raw[2:]
    return Path(raw)


def sandbox_policy_for(
    workspace: Path, config: Any, *, environ: Mapping[str, str] | None = None
) -> SandboxPolicy | None:
    """The sandbox policy for children working in `workspace` under `config` (the project's
    `Config`), or None when the sandbox is off or unavailable here. Pass the result to
    `ai_sdlc.spawn.start_session(argv, sandbox=policy, ...)`."""
    root = Path(config.path).parent.parent  # <root>/.ai-sdlc/config.yaml
    sandbox = Sandbox.from_config(config, root=root, environ=environ)
    policy = sandbox.policy_for(workspace)
    sandbox.check_links(workspace)
    return policy


def git_pointer(workspace: Path) -> tuple[str, ...]:
    """The `.git` file of the git worktree holding `workspace` (it names the worktree's git
    folder in the main repository), as a one-item tuple; () in a main checkout (`.git` is a
    folder outside every writable root there) or outside git."""
    folder = Path(os.path.realpath(workspace))
    for candidate in (folder, *folder.parents):
        entry = candidate / ".git"
        if entry.is_symlink():
            return ()
        if entry.is_file():
            return (str(entry),)
        if entry.exists():
            return ()
    return ()
