"""The commented config file `ai-sdlc init` writes (its values are the models' defaults: a
test holds them equal)."""

from __future__ import annotations

DEFAULT_CONFIG_TEXT = """\
# ai-sdlc configuration. Edit by hand or with `ai-sdlc config <dotted.key> <value>`.
# Every key is optional; the values shown are the defaults. A guardrail (limits, verify, gates)
# changed by hand is refused by the next run until you confirm it: `ai-sdlc config --accept`.

ai:
  # scripted (offline, no AI) | dry-run | openai | anthropic | claude | command.
  # Unset: AI_SDLC_PROVIDER, then auto-detect, else a run stops (exit 4).
  provider: null
  model: null

verify:
  # Command lines run in the story's workspace without a shell, e.g. "make verify" or "pytest -q".
  build: null
  test: null
  timeout: 600        # seconds per command
  max_parallel: null  # verification commands at once across a parallel run; null: CPU count
  baseline: true      # verify the story's untouched base first (floor; stop if it cannot run)
  protected: null     # test files kept as they were (globs); null: the detected test files
  junit: null         # a JUnit XML report the test command writes, read for the test counts
  none: false         # true: no verify command on purpose (stories done "unverified")

limits:                        # guardrails: an AI_SDLC_LIMITS__* variable may lower, never raise
  global_recovery: 10          # every recovery of every kind counts; the story blocks here
  implementation_retries: 3    # limits.* counts: at most 1000 (global_recovery: 1..1000)
  review_rejections: 3         # rework cycles after a REJECTED review
  refinement_iterations: 5

gates:
  before_implementation: false # wait for `ai-sdlc approve <id>` before implementing
  before_done: false           # wait for `ai-sdlc approve <id>` before marking done

run:                           # multi-story runs (--auto, --batch): halt when clearly failing
  stop_conditions:
    max_retry_rate: 0.5        # stories that needed any retry / stories attempted
    max_reject_rate: 0.3       # stories blocked or failed / stories attempted
    max_consecutive_fails: 3   # stories in a row that failed (an approval resets it)
    max_total_attempts: 50     # implementation attempts in one run segment
    min_attempted: 4           # stories attempted before the rates judge
  max_consecutive_escalations: 2  # blocked/failed stories in a row: FAILURE LOOP DETECTED
  max_bounces: 3               # step-backs (review -> implement ...) before a story escalates
  cooldown_seconds: 5          # wait before retrying a story whose phase crashed
  max_story_errors: 2          # crashes of one story before it is escalated
  jobs: 1                      # stories run at once (`run --jobs N`), each in a worker process
  done_means: done             # a dependency is met when it is: done | pr (done with a PR) | merged

notify:                        # told when a run halts (the diagnostic JSON)
  command: null                # e.g. ["python", "notify.py"]: run without a shell, JSON on stdin
  webhook: null                # e.g. https://hooks.example.com/...: JSON POSTed

git:                           # in a git repository: one worktree and branch per story
  worktrees: true              # false (or `run --no-worktree`): agents work in the project folder
  base_branch: ""              # stories branch from it and PRs target it; "": the default branch
  worktrees_dir: .ai-sdlc/worktrees
  remote: origin               # where done stories' branches are pushed
  keep_failed_attempts: false  # true: leave a failed attempt's changes instead of rolling back
  draft: false                 # open pull requests as drafts
  auto_merge: false            # wait for the PR's checks, then squash-merge it
  keep_worktrees: false        # true: keep a done story's worktree (and its environment)

sandbox:                       # agents, tools and verify commands write only to their worktree
  enabled: true                # (Linux Landlock; see docs/sandbox.md). `run --no-sandbox`: off
  required: true               # run --auto / watch refuse to start where no sandbox is available
  writable: []                 # more folders they may write, e.g. ["~/.gradle", "~/.cargo"]
  deny_read: []                # more paths no child may read (besides ~/.ssh, ~/.aws, ...)
  network: [setup]             # steps with the open network: verify, tools, setup, agents
  pass_env: []                 # credential variables children get, e.g. [GH_TOKEN]

worktree:                      # each story worktree's own environment (see docs/verification.md)
  setup: []                    # command lines run in a new worktree (no shell), e.g. ["npm ci"]
  setup_inputs: null           # files whose change runs setup again; null: lock files, manifests
  setup_timeout: 900           # seconds per setup command
"""


#: The `worktree.setup` line of `DEFAULT_CONFIG_TEXT` (`init` writes its proposal there).
DEFAULT_SETUP_LINE = (
    "  setup: []                    # command lines run in a new worktree (no shell), "
    'e.g. ["npm ci"]'
)
