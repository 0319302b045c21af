"""The caller's environment reaches the call (issue 15, part 3), against a real cluster.

- A second virtualenv is the caller: its calls run in executors started from its interpreter,
  and a package installed into it mid-session is importable by the next call.
- pip=[...] builds a cached environment on the worker from a local wheel (no network: pip
  --no-index --find-links), the call imports the package, and the next call reuses it.
- A call from another Python minor version fails, naming both versions.

The wheels are made here by hand (a zip with the module and its dist-info): no build backend,
no network.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

import bulletin
from cluster_support import CALL_SECONDS, start_cluster

pytestmark = pytest.mark.timeout(240)

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # python-client/


def make_wheel(folder: Path, name: str, version: str, source: str) -> Path:
    """A pure-Python wheel of one module, ``name``, whose code is ``source``."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": source.encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                         b"Tag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def site_packages(prefix: Path) -> Path:
    return prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / \
        "site-packages"


@pytest.fixture(scope="module")
def env_cluster(tmp_path_factory):
    """A cluster of its own, so that its environment cache is a folder of this test's."""
    home = tmp_path_factory.mktemp("bulletin-home-envs")
    cache = tmp_path_factory.mktemp("env-cache")
    env = dict(os.environ, BULLETIN_HOME=str(home), BULLETIN_ENV_CACHE=str(cache))
    for name in ("BULLETIN_ADDRESS", "BULLETIN_TOKEN"):
        env.pop(name, None)
    env.setdefault("BULLETIN_JAR", str(PACKAGE_ROOT / "bulletin" / "_jars" /
                                       "bulletin-runtime.jar"))
    cluster = start_cluster(home, env=env)
    cluster.env_cache = cache
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def caller_venv(tmp_path_factory) -> Path:
    """A second virtualenv, the caller: its own site-packages first, then this one's (for
    bulletin and its dependencies), the way a notebook's env would have them installed."""
    prefix = tmp_path_factory.mktemp("caller") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    ours = [p for p in sys.path if p.endswith("site-packages")]
    (site_packages(prefix) / "_test_base.pth").write_text(
        f"import site; list(map(site.addsitedir, {ours!r}))\n"
        f"{PACKAGE_ROOT}\n")
    return prefix


CALLER_SCRIPT = textwrap.dedent("""
    import json, subprocess, sys
    import bulletin

    def probe():
        import os, sys
        try:
            import tinyfresh
            found = tinyfresh.VALUE
        except ImportError as exc:
            found = "missing: " + str(exc)
        return found, sys.executable, sys.prefix, os.getpid()

    client = bulletin.Client(sys.argv[1], token=sys.argv[2])
    before = client.submit(probe).result(timeout=60)
    again = client.submit(probe).result(timeout=60)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    sys.argv[3]], check=True)
    after = client.submit(probe).result(timeout=60)
    print(json.dumps({"before": before, "again": again, "after": after}))
    client.close()
""")


def test_a_package_installed_into_the_callers_venv_is_importable_at_the_next_call(
        env_cluster, caller_venv, tmp_path):
    wheel = make_wheel(tmp_path / "wheels", "tinyfresh", "1.0", "VALUE = 'fresh from the venv'\n")
    script = tmp_path / "caller.py"
    script.write_text(CALLER_SCRIPT)
    python = caller_venv / "bin" / "python"
    run = subprocess.run([str(python), str(script), env_cluster.address, env_cluster.token,
                          str(wheel)], capture_output=True, text=True, timeout=200,
                         env={k: v for k, v in os.environ.items()
                              if not k.startswith("BULLETIN_")})
    assert run.returncode == 0, run.stdout + run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    # The call runs in the caller's venv: its interpreter, its prefix.
    assert seen["before"][0].startswith("missing:")
    assert seen["before"][1] == str(python) and seen["before"][2] == str(caller_venv)
    assert seen["again"][0].startswith("missing:")
    assert seen["after"][:3] == ["fresh from the venv", str(python), str(caller_venv)]
    # Executors restart when the environment changed, not at every call.
    assert seen["again"][3] == seen["before"][3]
    assert seen["after"][3] != seen["before"][3]


def imports_tinybuilt():
    import sys

    import tinybuilt
    return tinybuilt.VALUE, sys.prefix


def test_pip_builds_a_cached_environment_from_a_local_wheel(env_cluster, tmp_path, capfd):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "tinybuilt", "2.0", "VALUE = 'built by the worker'\n")
    pip = ["--no-index", f"--find-links={wheels}", "tinybuilt==2.0"]
    with env_cluster.client(set_as_default=False) as client:
        with pytest.raises(ModuleNotFoundError):  # the worker's own environment lacks it
            client.submit(imports_tinybuilt).result(timeout=CALL_SECONDS)
        value, prefix = client.submit(imports_tinybuilt, pip=pip).result(timeout=200)
        assert value == "built by the worker"
        assert Path(prefix).parent.parent == env_cluster.env_cache
        first = capfd.readouterr()
        assert "building the environment" in first.out + first.err
        # Cached: the next calls do not build again.
        for _ in range(2):
            again = client.submit(imports_tinybuilt, pip=pip).result(timeout=CALL_SECONDS)
            assert tuple(again) == (value, prefix)
        second = capfd.readouterr()
        assert "building the environment" not in second.out + second.err
    built = [p for p in Path(prefix).parent.iterdir()]
    assert built == [Path(prefix)]


def test_a_call_from_another_python_version_fails_naming_both(env_cluster):
    with env_cluster.client(set_as_default=False) as client:
        caller = client._submitter._environment
        caller.executable, caller.python_version = "/opt/python3.99/bin/python", "3.99"
        here = "%d.%d" % sys.version_info[:2]
        with pytest.raises(bulletin.CallEnvironmentError, match=(
                rf"Python 3\.99 \(/opt/python3\.99/bin/python\).*is Python {here}")):
            client.submit(os.getpid).result(timeout=CALL_SECONDS)


def test_pip_options_that_write_elsewhere_are_refused(env_cluster):
    with pytest.raises(bulletin.InvalidArgumentError, match="--target"):
        bulletin.cpu(os.getpid, pip=["--target=/tmp/x", "six"])
