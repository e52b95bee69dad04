"""The private Codex config: the user's own file, every provider's retries off, read back by
the same parser Codex's users write for (TOML 1.0 through tomllib)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ai_sdlc.sandbox.codexconf import dumps, private_codex_config

#: A config.toml as users write it: a provider of their own with no retry settings, one with
#: Codex's default retries spelt out, a profile, MCP servers, arrays and odd keys.
USER_CONFIG = """\
model = "gpt-5"
model_provider = "mine"
notify = ["notify-send", "codex"]
approval_policy = "never"

[model_providers.mine]
name = "My proxy"
base_url = "http://127.0.0.1:9/v1"
env_key = "MY_KEY"
wire_api = "responses"
query_params = { "api-version" = "2025-04-01" }

[model_providers.azure]
name = "Azure"
base_url = "https://x.openai.azure.com/openai"
request_max_retries = 4
stream_max_retries = 10
stream_idle_timeout_ms = 300000

[profiles.fast]
model = "o4-mini"
model_reasoning_effort = "low"

[mcp_servers."docs server"]
command = "npx"
args = ["-y", "docs-mcp"]
env = { "TOKEN_FILE" = "/dev/null" }

[[skills]]
path = "a"

[[skills]]
path = "b"
"""


def test_every_provider_of_the_users_config_gets_no_retries(tmp_path: Path) -> None:
    user = tmp_path / "config.toml"
    user.write_text(USER_CONFIG)
    mine = tomllib.loads(USER_CONFIG)
    private = tomllib.loads(private_codex_config(user))
    for name in ("mine", "azure"):
        assert private["model_providers"][name]["request_max_retries"] == 0
        assert private["model_providers"][name]["stream_max_retries"] == 0
    # Everything else is the user's, as written.
    for name, info in mine["model_providers"].items():
        kept = {k: v for k, v in private["model_providers"][name].items() if "retries" not in k}
        assert kept == {k: v for k, v in info.items() if "retries" not in k}
    rest = {k: v for k, v in private.items() if k != "model_providers"}
    assert rest == {k: v for k, v in mine.items() if k != "model_providers"}
    assert user.read_text() == USER_CONFIG  # the user's file is never changed


def test_no_or_a_broken_user_config_gives_an_empty_private_one(tmp_path: Path) -> None:
    assert private_codex_config(tmp_path / "missing.toml") == ""
    broken = tmp_path / "config.toml"
    broken.write_text("model = [\n")
    assert private_codex_config(broken) == ""


def test_the_writer_says_every_toml_value_the_parser_reads() -> None:
    text = (
        'a = "quote \\" and \\\\ and \\n and \\u00e9 \\t"\nb = 1.5\nc = -3\nd = true\n'
        "e = 1979-05-27T07:32:00Z\nf = 1979-05-27\ng = 07:32:00\nh = inf\n"
        'i = [[1, 2], ["x"]]\nj = {k = {l = 1}}\n"odd key" = 1\n'
        '[t."sub table".x]\ny = 2\n[[arr]]\nz = 1\n[[arr]]\nz = 2\n[arr.inner]\nq = 3\n'
    )
    data = tomllib.loads(text)
    assert tomllib.loads(dumps(data)) == data
