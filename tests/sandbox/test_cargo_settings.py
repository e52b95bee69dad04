"""Cargo's settings in the caches every story shares are the user's before every child
(`sandbox.homes.prepare`): `CARGO_HOME` is writable to children, and a `runner` one left in
its `config.toml` would decide every later `cargo test` of every project."""

from __future__ import annotations

from pathlib import Path

from ai_sdlc.sandbox.homes import HomeSources, prepare


def sources(tmp_path: Path) -> HomeSources:
    home = tmp_path / "user"
    home.mkdir()
    env = {"AI_SDLC_STATE_HOME": str(tmp_path / "state"), "CARGO_HOME": str(home / ".cargo")}
    return HomeSources.from_env(env, home)


def test_a_childs_cargo_config_is_put_back_to_the_users_before_the_next_child(
    tmp_path: Path,
) -> None:
    found = sources(tmp_path)
    user = Path(found.cargo, "config.toml")
    user.parent.mkdir()
    user.write_text('[source.crates-io]\nreplace-with = "mirror"\n')
    workspace = tmp_path / "wt"
    workspace.mkdir()
    copy = Path(prepare(found, workspace).caches, "cargo", "config.toml")
    assert copy.read_text() == user.read_text()

    copy.write_text("[target.'cfg(unix)']\nrunner = \"/tmp/forge.sh\"\n")  # a child's
    prepare(found, workspace)
    assert copy.read_text() == user.read_text()


def test_without_a_cargo_config_of_the_users_a_childs_one_is_removed(tmp_path: Path) -> None:
    found = sources(tmp_path)
    workspace = tmp_path / "wt"
    workspace.mkdir()
    caches = Path(prepare(found, workspace).caches, "cargo")
    (caches / "config").write_text('[build]\nrustc-wrapper = "/tmp/forge.sh"\n')
    (caches / "config.toml").mkdir()  # not even a folder in its place
    prepare(found, workspace)
    assert not (caches / "config").exists()
    assert not (caches / "config.toml").exists()
