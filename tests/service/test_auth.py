"""The API token: created 0600, reused, overridden by the environment, refused if exposed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from edgewise.errors import ConfigError
from edgewise.service import JobManager, create_app, load_or_create_token, make_server
from edgewise.service.auth import token_path, token_source


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("EDGEWISE_TOKEN", raising=False)
    monkeypatch.delenv("EDGEWISE_TOKEN_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # never touch the real ~/.config


def test_token_file_is_created_0600_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "edgewise" / "token"
    token = load_or_create_token(path)
    assert len(token) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == token
    assert load_or_create_token(path) == token


def test_default_location_and_file_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert token_path() == tmp_path / "home" / ".config" / "edgewise" / "token"
    token = load_or_create_token()
    assert (tmp_path / "home" / ".config" / "edgewise" / "token").read_text().strip() == token
    monkeypatch.setenv("EDGEWISE_TOKEN_FILE", str(tmp_path / "other"))
    assert token_path() == tmp_path / "other"
    assert load_or_create_token() != token


def test_environment_token_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "token"
    load_or_create_token(path)
    monkeypatch.setenv("EDGEWISE_TOKEN", "from-env-token")
    assert load_or_create_token(path) == "from-env-token"
    assert token_source(path) == "the EDGEWISE_TOKEN environment variable"
    monkeypatch.setenv("EDGEWISE_TOKEN", "  ")
    with pytest.raises(ConfigError, match="EDGEWISE_TOKEN"):
        load_or_create_token(path)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_token_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "token"
    path.write_text("some-token\n")
    path.chmod(mode)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_or_create_token(path)


def test_empty_token_file_and_symlink_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.touch(mode=0o600)
    with pytest.raises(ConfigError, match="non-empty"):
        load_or_create_token(empty)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="token file"):
        load_or_create_token(link)
    assert not (tmp_path / "elsewhere").exists()


def test_the_server_refuses_a_remote_host_without_allow_remote(backend: JobManager) -> None:
    app = create_app(backend, "a-token")
    for host in ("0.0.0.0", "::", "192.168.1.10", "manager.example"):
        with pytest.raises(ConfigError, match="allow_remote"):
            make_server(app, host=host)
    make_server(app, host="0.0.0.0", allow_remote=True)  # said on purpose: allowed
