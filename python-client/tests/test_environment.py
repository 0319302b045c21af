"""The client's side of call environments and memory limits: the fingerprint, pip= checks,
and the errors a worker's failure becomes."""

from __future__ import annotations

import os
import sys
import time

import pytest

import bulletin
from bulletin import _environment
from bulletin._config import Options
from bulletin._connection import failure_error
from bulletin._environment import CallerEnvironment, parse_pip
from bulletin._proto import bulletin_pb2 as pb


def test_the_fingerprint_changes_when_a_package_folder_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(_environment, "_RECHECK_SECONDS", 0.0)
    caller = CallerEnvironment()
    caller._folders = [str(tmp_path)]
    first = caller.fingerprint()
    assert caller.fingerprint() == first  # nothing changed: the same, without hashing again
    (tmp_path / "newpkg").mkdir()
    os.utime(tmp_path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert caller.fingerprint() != first
    assert caller.executable == os.path.abspath(sys.executable)
    assert caller.python_version == "%d.%d" % sys.version_info[:2]


def test_pip_takes_requirements_and_the_options_that_say_where_packages_come_from():
    assert parse_pip("scipy") == ("scipy",)
    assert parse_pip(["--no-index", "--find-links=/w", "mypkg==1.0"]) == (
        "--no-index", "--find-links=/w", "mypkg==1.0")
    assert Options.make(pip=["scipy"]).pip == ("scipy",)
    for bad in (["--target=/tmp/x", "six"], ["--user", "six"], [""], [3], {"a": 1}):
        with pytest.raises(bulletin.InvalidArgumentError, match="pip="):
            parse_pip(bad)


def test_a_workers_memory_and_environment_failures_become_their_own_errors():
    over = failure_error(pb.EXECUTOR_DIED, "the call went over its memory limit of "
                         "memory=256MiB (cgroup memory.max) and was killed")
    assert isinstance(over, bulletin.MemoryLimitError) and isinstance(over, MemoryError)
    assert "256MiB" in str(over)
    version = failure_error(pb.EXECUTOR_DIED, "the call was made from Python 3.99, but ...")
    assert isinstance(version, bulletin.CallEnvironmentError)
    died = failure_error(pb.EXECUTOR_DIED, "executor w-e1 killed by SIGKILL")
    assert type(died) is bulletin.WorkerDiedError
