"""Shared fixtures of the unit tests. Nothing here is autouse: tests/e2e/ brings its own
environment (a real cluster started with `bulletin up`)."""

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
