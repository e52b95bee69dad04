"""A run session: builds the runner from the project's config (provider, verification, resilience
policies, limits) and runs one story, the next recommended action, or a multi-story run
(`--auto`, `--batch`, `--resume`, `--continue`; see `multirun`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ai_sdlc.config import Config, load_config
from ai_sdlc.config.guard import GuardrailRecord
from ai_sdlc.environ import current as current_environ
from ai_sdlc.errors import AiSdlcError, InvalidInputError, StoryBlockedError, UsageError
from ai_sdlc.providers.base import Phase, Provider
from ai_sdlc.sandbox.policy import Sandbox, SandboxPolicy
from ai_sdlc.store import StoryStore
from ai_sdlc.verify import VerificationResult, run_commands, verify_environment
from ai_sdlc.verify.bytecode import Seeds
from ai_sdlc.verify.judge import (
    SAFE_PATH_VAR,
    Judge,
    JudgeSettings,
    held_settings,
    lost_project_module,
)
from ai_sdlc.verify.pytest_run import dropped_options
from ai_sdlc.workflow.engine.assess import NextAction, recommend
from ai_sdlc.workflow.engine.runner import RunnerDeps, StoryOutcome, StoryRunner
from ai_sdlc.workflow.state.events import Clock, iso, utc_now
from ai_sdlc.workflow.state.guard import GuardFactory
from ai_sdlc.workflow.state.readiness import unmet_dependencies
from ai_sdlc.workflow.state.runlock import run_lock
from ai_sdlc.workflow.wiring import (
    Emit,
    Relay,
    limits_from,
    verification_commands,
    worktree_environment,
)

if TYPE_CHECKING:  # a one-story run imports runs/ only for its record (runs/single.py)
    from ai_sdlc.workflow.runs import graph as G
    from ai_sdlc.workflow.runs.idle import Idle
    from ai_sdlc.workflow.runs.multirun import RunOutcome
    from ai_sdlc.workflow.runs.runstate import RunRepository, RunState

#: The lock name that allows one multi-story run per project at a time.
MULTI_RUN_LOCK = "multi"
#: A run's resilience metrics are flushed after a call or a phase once this many seconds passed
#: since the last flush, and whenever a story's run ends (however it ends): a process killed
#: mid-run loses at most the counts of the calls it finished within this many seconds after
#: its last flush (a guardrail stop flushes at once).
METRICS_FLUSH_INTERVAL = 2.0


def _nothing(_workspace: Path) -> None:
    return None


def _addopts(commands: Sequence[tuple[str, str]]) -> str:
    """The notice naming what verification leaves out of the user's PYTEST_ADDOPTS."""
    dropped = dropped_options(current_environ()) if commands else []
    if not dropped:
        return ""
    return (
        f"verification ignores {' '.join(dropped)} from PYTEST_ADDOPTS: options that choose "
        "or stop which tests run would change the verdict"
    )


class Session(msgspec.Struct):
    store: StoryStore
    config: Config
    provider: Provider
    runner: StoryRunner
    notice: str | None = None
    relay: Relay = msgspec.field(default_factory=lambda: Relay(lambda _event: None))
    clock: Clock = utc_now
    sleep: Callable[[float], None] = time.sleep
    #: How it was opened (a parallel run's workers open the same way).
    provider_name: str | None = None
    no_worktree: bool = False
    #: `--no-sandbox`: children run unconfined on purpose.
    no_sandbox: bool = False
    #: The sandbox of this session's children (see `ai_sdlc.sandbox`).
    sandbox: Sandbox | None = None
    #: The session's temp folders (protected bytecode its verifications share): `close`.
    seeds: Seeds = msgspec.field(default_factory=Seeds)

    def close(self) -> None:
        """Remove the session's temp folders. Whoever opens a session closes it when its
        command (or a worker's task) ends, however it ends: `with Session.open(...)`."""
        self.seeds.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @classmethod
    def open(
        cls,
        store: StoryStore,
        *,
        provider_name: str | None,
        emit: Emit,
        environ: dict[str, str] | None = None,
        clock: Clock = utc_now,
        sleep: Callable[[float], None] = time.sleep,
        no_worktree: bool = False,
        config: Config | None = None,
        no_sandbox: bool = False,
        step: Phase | None = None,
    ) -> Session:
        """`config`: the project's, when the caller has just loaded it (else loaded here).
        `no_sandbox`: agents and verification commands run unconfined (`--no-sandbox`).
        `step`: the one phase a `--step` run runs (one before implement needs no verification)."""
        from ai_sdlc.git.workspace import select_workspace
        from ai_sdlc.providers.selection import select_provider

        if config is None:
            config = load_config(store.root)
        guardrails = GuardrailRecord(store.root)
        guardrails.check("since they were last accepted")
        commands = verification_commands(config)
        judged = step is None or step in (Phase.IMPLEMENT, Phase.REWORK, Phase.REVIEW)
        if judged and not commands and not config.typed().verify.none:
            raise InvalidInputError(
                "no verification configured (verify.build / verify.test): a story would be "
                "'done' with nothing built or tested",
                hint="tell it how the project is tested: ai-sdlc config verify.test "
                "'pytest -q'; or, on purpose, let stories be done unverified: ai-sdlc config "
                "verify.none true",
            )
        selection = select_provider(
            flag=provider_name, config=config, project_root=store.root, environ=environ
        )
        provider = selection.provider
        relay = Relay(emit)
        guards = GuardFactory.from_config(store, config)
        guards.manager.flush_interval = METRICS_FLUSH_INTERVAL
        typed = config.typed()
        timeout = config.typed().verify.timeout
        sandbox = Sandbox.from_config(config, root=store.root, environ=environ)

        linked_checked: set[Path] = set()

        def confine(workspace: Path) -> SandboxPolicy | None:
            if no_sandbox:
                return None
            policy = sandbox.policy_for(workspace)
            if workspace not in linked_checked:  # before the workspace's first child
                sandbox.check_links(workspace)
                linked_checked.add(workspace)
            return policy

        workspaces, isolation = select_workspace(
            store.root, config, no_worktree=no_worktree, guard=guards.git
        )
        environment = worktree_environment(workspaces, config, commands, confine)
        judge = (
            Judge(JudgeSettings.from_config(config, commands), store.ai_dir / "state")
            if commands
            else None
        )

        seeds = Seeds()  # the protected bytecode every verification of this session starts with

        def verifier(workspace: Path) -> VerificationResult:
            relay.check_config()
            env = verify_environment(typed.verify.env, typed.sandbox.pass_env)
            if environment is not None:
                changed = environment.ensure(workspace, after_attempt=True)
                if changed is not None:
                    return changed  # the attempt's change broke the worktree's setup
                environment.check(workspace)
                env = environment.verify_environment(workspace)
            env = held_settings(env)
            safe = judge is not None and judge.safe_path(workspace)
            policy = confine(workspace)
            policy = None if policy is None else policy.for_step("verify")

            def verify(environ: dict[str, str]) -> VerificationResult:
                return guards.verification(
                    lambda: run_commands(
                        commands,
                        cwd=workspace,
                        timeout=timeout,
                        env=environ,
                        sandbox=policy,
                        fallback=store.root,
                        seeds=seeds,
                    )
                )

            deciding = judge is not None and judge.deciding(workspace)
            if judge is not None and not deciding:
                judge.freshen(workspace)  # no stale build of other code stands for the change
            verdict = verify({**env, SAFE_PATH_VAR: "1"} if safe else env)
            if safe and not deciding and lost_project_module(workspace, verdict):
                verdict = verify(env)  # the story's new module, hidden by safe path
            return verdict

        deps = RunnerDeps(
            store=store,
            provider=provider,
            verifier=verifier,
            workspaces=workspaces,
            verification_configured=bool(commands),
            judge=judge,
            limits=limits_from(config),
            gates=dict(config.section("gates")),
            guard_factory=guards.for_story,
            ai_settings=dict(config.section("ai")),
            emit=relay.emit,
            clock=clock,
            before_phase=relay.before_phase,
            metrics=guards.manager,
            sandbox=confine,
            sandbox_missing=sandbox.missing_reason(no_sandbox=no_sandbox),
            check_workspace=environment.check if environment is not None else _nothing,
        )
        runner = StoryRunner(deps)
        relay.guard = guardrails
        relay.note = runner.owner.note
        notices = (selection.notice, isolation, _addopts(commands))
        notice = "\n".join(n for n in notices if n) or None
        return cls(
            store,
            config,
            provider,
            runner,
            notice,
            relay,
            clock,
            sleep,
            provider_name,
            no_worktree,
            no_sandbox,
            sandbox,
            seeds,
        )

    def run(
        self,
        *,
        story_id: str | None,
        auto: bool,
        step: Phase | None,
        ignore_dependencies: bool = False,
    ) -> list[StoryOutcome]:
        """One story (refused while a dependency is not done, unless `ignore_dependencies`), or
        without one the story of the next recommended action, taken to done like `run <id>`
        (a `story_picked` event says which); `auto` is a
        multi-story run (use `run_many` for its report: state, halt reason, diagnostic)."""
        if story_id:
            if not ignore_dependencies:
                self._check_dependencies(story_id)
            return [self._run_one(story_id, step=step)]
        if auto:
            report = self.run_many()
            return report.outcomes if report else []
        actions = self._recommend()
        if not actions:
            return []
        first = actions[0]
        self.relay.emit({"event": "story_picked", "story": first.story_id, "reason": first.reason})
        return [self._run_one(first.story_id, step=step)]

    # --- multi-story runs ---------------------------------------------------------------------
    def run_many(
        self,
        *,
        story_ids: Sequence[str] | None = None,
        resume: str | None = None,
        latest: bool = False,
        jobs: int | None = None,
        epic: str | None = None,
        executor: str | None = None,
        ray_address: str | None = None,
        max_attempts: int | None = None,
    ) -> RunOutcome | None:
        """A new run over `story_ids` (None: every actionable story by priority; `epic`: only
        that epic's), or the run `resume` (`latest`: the most recent one) continued. Up to
        `jobs` stories at once (None: `run.jobs`; a resumed run keeps its own). The dependency
        graph is checked first (a cycle or a missing story: exit 3, nothing runs).
        `max_attempts` replaces `run.stop_conditions.max_total_attempts` for this run. None
        when there is nothing to run."""
        from ai_sdlc.workflow.runs.idle import held_outside, unreadable_of
        from ai_sdlc.workflow.runs.multirun import MultiRun, RunSettings, prepare_resume
        from ai_sdlc.workflow.runs.notify import Notifier
        from ai_sdlc.workflow.runs.runstate import COMPLETED, RunRepository

        repo = RunRepository(self.store.ai_dir)
        settings = RunSettings.from_config(self.config, max_attempts=max_attempts)
        if settings.done_means == "merged" and not self.config.typed().git.auto_merge:
            raise UsageError(
                "run.done_means is 'merged' but git.auto_merge is off: no story would ever be "
                "merged by a run",
                hint="set git.auto_merge: true, or run.done_means: done (or pr)",
            )
        which = executor or self.config.typed().run.executor
        ray_spec = None
        if which == "ray":  # refused before a run exists (no remote, no worktrees, no Ray)
            from ai_sdlc.workflow.parallel.ray_executor import ray_spec_for

            ray_spec = ray_spec_for(self, open_worker)
        with run_lock(self.store.ai_dir, MULTI_RUN_LOCK, what="a multi-story run of this project"):
            if resume or latest:
                state = self._resumable(repo, resume)
                graph = self._graph([s.story_id for s in state.stories])
                self._check_graph(graph, [s.story_id for s in state.stories])
                prepare_resume(state, self.store)
                if jobs is not None:
                    state.jobs = jobs
                repo.save(state, now=self.clock())
            else:
                graph = self._graph(story_ids if epic is None else None)
                state_or_none = self._new_run(repo, story_ids, graph, epic=epic, jobs=jobs)
                if state_or_none is None:
                    return None
                state = state_or_none
            common: dict[str, Any] = {
                "store": self.store,
                "runner": self.runner,
                "repo": repo,
                "state": state,
                "settings": settings,
                "notifier": Notifier.from_config(self.config, cwd=self.store.root),
                "emit": self.relay.out,
                "clock": self.clock,
                "sleep": self.sleep,
                "graph": graph,
            }
            if ray_spec is not None:
                outcome = self._run_on_ray(common, state.jobs, ray_address, ray_spec)
            elif state.jobs > 1:
                outcome = self._run_parallel(common, state.jobs)
            else:
                state.executor = "inline"
                run = MultiRun(**common)
                self.relay.watcher = run
                try:
                    outcome = run.execute()
                finally:
                    self.relay.watcher = None
        outcome.held = held_outside(outcome.state, self.store, self.config)
        if outcome.state.run_status == COMPLETED and outcome.state.mode != "batch":
            outcome.unreadable = unreadable_of(self.store)
        return outcome

    def idle(self, *, epic: str | None = None) -> Idle:
        """Why a run found nothing to do (`run_many` returned None, a bare `run` had no next
        action): the blocked stories and those waiting, and the exit code that says so."""
        from ai_sdlc.workflow.runs.idle import idle_of

        return idle_of(self.store, self.config, epic=epic, unreadable=True)

    def _run_parallel(self, common: dict[str, Any], jobs: int) -> RunOutcome:
        import os

        from ai_sdlc.workflow.parallel.executors import LocalExecutor, WorkerSpec
        from ai_sdlc.workflow.parallel.scheduler import ParallelRun

        spec = WorkerSpec(
            project=str(self.store.root),
            provider=self.provider_name,
            no_worktree=self.no_worktree,
            no_sandbox=self.no_sandbox,
            environ=dict(os.environ),
            cwd=os.getcwd(),
            open_session=open_worker,
        )
        slots = self.config.typed().verify.max_parallel or os.cpu_count() or 1
        executor = LocalExecutor(spec, verify_slots=slots)
        common["state"].executor = executor.name
        return ParallelRun(**common, executor=executor, jobs=jobs).execute()

    def _run_on_ray(
        self, common: dict[str, Any], jobs: int, address: str | None, spec: Any
    ) -> RunOutcome:
        """The same coordinator with its stories on a Ray cluster (see `ray_executor`)."""
        from ai_sdlc.workflow.parallel.ray_executor import ray_executor_for
        from ai_sdlc.workflow.parallel.scheduler import ParallelRun

        executor = ray_executor_for(self, address, spec)
        common["state"].executor = executor.name
        return ParallelRun(**common, executor=executor, jobs=jobs).execute()

    def _graph(self, story_ids: Sequence[str] | None) -> G.Graph:
        """The dependency graph a run needs: of every story (`--auto` and `--epic` choose among
        them all), or of the named stories and what they depend on, transitively: a batch or a
        resumed run reads its own stories, not a backlog of 20,000. A story that cannot be read
        is left out, as a listing leaves it out (a dependency on it is then refused by name)."""
        from ai_sdlc.workflow.runs import graph as G

        if story_ids is None:
            return G.build((s.id, s.frontmatter) for s in self.store.list())
        found: dict[str, Mapping[str, Any]] = {}
        wanted = list(story_ids)
        while wanted:
            sid = wanted.pop()
            if sid in found:
                continue
            try:
                story = self.store.get(sid)
            except AiSdlcError:
                continue
            found[story.id] = story.frontmatter
            wanted.extend(G.node_of(story.id, story.frontmatter).dependencies)
        return G.build(sorted(found.items()))

    def _check_graph(self, graph: G.Graph, ids: Sequence[str]) -> None:
        from ai_sdlc.workflow.runs import graph as G

        where = {
            sid: str(self.store.root / ".ai-sdlc" / "stories" / sid / "story.md")
            for sid in graph.nodes
        }
        G.check(graph, ids, where=where)

    def _new_run(
        self,
        repo: RunRepository,
        story_ids: Sequence[str] | None,
        graph: G.Graph,
        *,
        epic: str | None,
        jobs: int | None,
    ) -> RunState | None:
        from ai_sdlc.workflow.runs import graph as G
        from ai_sdlc.workflow.runs.idle import startable
        from ai_sdlc.workflow.runs.runstate import RunState, StoryRunState, new_run_id

        if story_ids is None:  # the run waits for a dependency it runs first: not skipped
            ids = [a.story_id for a in self._recommend(dependencies=False)]
            mode = "auto"
        else:
            ids = list(dict.fromkeys(story_ids))
            mode = "batch"
        if epic is not None:
            members = set(graph.in_epic(epic))
            if not members:
                raise UsageError(
                    f"no story belongs to epic {epic}",
                    hint="set `epic: <id>` (or a label `epic-<id>`) in the stories' frontmatter",
                )
            ids = [i for i in ids if i in members]
        self._check_graph(graph, ids)
        ids = G.order(graph, ids)
        if mode == "auto" and not startable(graph, ids, str(self.config.get("run.done_means"))):
            return None  # each would be skipped (a dependency blocked, ...): `idle` says why
        if not ids:
            return None
        now = self.clock()
        state = RunState(
            run_id=new_run_id(now),
            mode=mode,
            started_at=iso(now),
            stories=[StoryRunState(i) for i in ids],
            jobs=jobs if jobs is not None else self.config.typed().run.jobs,
            epic=epic,
        )
        repo.create(state)
        return state

    def _resumable(self, repo: RunRepository, run_id: str | None) -> RunState:
        return resumable(repo, run_id)

    def _recommend(self, *, dependencies: bool = True) -> list[NextAction]:
        """The next actions by priority; `dependencies`: without the stories whose
        dependencies are not done."""
        return recommend(
            (s.frontmatter for s in self.store.list()),
            gates=self.config.section("gates"),
            global_limit=self.runner.limit,
            done_means=self.config.typed().run.done_means if dependencies else None,
        )

    def _check_dependencies(self, story_id: str) -> None:
        """`run <id>`: refuse a story (not done yet) while a dependency is not done."""
        fm = self.store.get(story_id).frontmatter
        if fm.get("status") == "done":
            return

        def lookup(dep: str) -> Mapping[str, Any] | None:
            try:
                return self.store.get(dep).frontmatter
            except AiSdlcError:
                return None

        done_means = self.config.typed().run.done_means
        unmet = unmet_dependencies(fm, lookup, done_means)
        if unmet:
            which = ", ".join(u.describe(done_means) for u in unmet)
            first = unmet[0]
            how = f"run {first.story_id} first ('ai-sdlc run {first.story_id}')"
            if first.status == "blocked":
                how = f"unblock {first.story_id} ('ai-sdlc unblock {first.story_id}') and run it"
            raise DependencyNotDoneError(
                f"{story_id} cannot start: it depends on {which}, not done yet",
                hint=f"{how}, or insist with 'ai-sdlc run {story_id} --ignore-dependencies'",
            )

    def _run_one(self, story_id: str, *, step: Phase | None) -> StoryOutcome:
        from ai_sdlc.workflow.runs.single import SingleRun  # its record, for `ai-sdlc report`

        with run_lock(self.store.ai_dir, story_id, what=story_id):
            record = SingleRun(self.store, self.runner, story_id, self.clock)
            with record.watching(self.relay):
                try:
                    outcome = self.runner.run(story_id, step=step)
                except StoryBlockedError as exc:
                    outcome = StoryOutcome(story_id, "blocked", exc.message)
                return record.finish(outcome)


def open_worker(store: StoryStore, **options: Any) -> Session:
    """A parallel worker's own quiet session on the project: handed to the executors in their
    worker spec (pickled by reference), so the parallel package never imports this module.
    The worker closes it when its task ends."""
    return Session.open(store, emit=lambda _event: None, **options)


class DependencyNotDoneError(AiSdlcError):
    """`run <id>` on a story whose dependencies are not done (exit 1)."""


class ResumeRefusedError(AiSdlcError):
    """The run asked for cannot be resumed (it completed)."""


def resumable(repo: RunRepository, run_id: str | None) -> RunState:
    """The run `--resume RUN_ID` (None: `--continue`, the latest) continues, or the error
    that refuses it; `run --resume … --dry-run` asks the same, so its preview never differs
    from the run."""
    from ai_sdlc.workflow.runs.runstate import COMPLETED

    if run_id is None:
        state = repo.latest()
        if state is None:
            raise UsageError(
                "no run to continue in this project",
                hint="start one with 'ai-sdlc run --auto' or 'ai-sdlc run --batch ID...'",
            )
    else:
        state = repo.load(run_id)
    if state.run_status == COMPLETED:
        raise ResumeRefusedError(
            f"run {state.run_id} completed; there is nothing to resume",
            hint="start a new run with 'ai-sdlc run --auto'",
        )
    # A run still marked `running` while we hold the multi-run lock died (crash, SIGKILL):
    # its last saved state is complete, so it continues from there.
    return state
