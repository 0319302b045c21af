"""The runtime jar keeps only part of Bouncy Castle (runtime/pom.xml's shade filter drops its JCA
provider, post-quantum and OER packages): every path bulletin takes through it, run against the
shaded jar itself, so a class the filter dropped fails here rather than at a worker's join."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bulletin._launch import find_jar

SMOKE = (Path(__file__).resolve().parents[2] / "runtime" / "src" / "test" / "smoke"
         / "ShadedBouncyCastleSmoke.java")


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")
def test_the_shaded_jar_signs_a_worker_certificate():
    out = subprocess.run(["java", "-cp", str(find_jar()), str(SMOKE)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "shaded Bouncy Castle: ok" in out.stdout
