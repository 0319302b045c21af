import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "gen_proto.py"


@pytest.mark.parametrize("flags, lines", [([], 0), (["--verbose"], 3)])
def test_gen_proto_is_quiet_unless_asked(flags, lines):
    # `make build` runs it on every build: it says nothing unless it fails or is asked to.
    result = subprocess.run([sys.executable, str(TOOL), *flags], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == lines, result.stdout
    assert all(line.startswith("wrote ") for line in result.stdout.splitlines())
