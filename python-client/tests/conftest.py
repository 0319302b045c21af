"""Shared fixtures. Nothing here is autouse: tests/e2e/ brings its own environment."""

from __future__ import annotations

import pytest


@pytest.fixture
def bulletin_env(tmp_path, monkeypatch):
    """An empty BULLETIN_HOME and no address or token from the caller's environment."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("BULLETIN_HOME", str(home))
    monkeypatch.delenv("BULLETIN_ADDRESS", raising=False)
    monkeypatch.delenv("BULLETIN_TOKEN", raising=False)
    monkeypatch.delenv("BULLETIN_JAR", raising=False)
    return home


@pytest.fixture
def loopback(tmp_path, bulletin_env):
    from loopback_runtime import LoopbackRuntime

    store = tmp_path / "store"
    store.mkdir()
    runtime = LoopbackRuntime(store)
    yield runtime
    runtime.stop()


@pytest.fixture
def client(loopback):
    import bulletin

    c = bulletin.Client(loopback.address, token=loopback.token)
    yield c
    c.close()
