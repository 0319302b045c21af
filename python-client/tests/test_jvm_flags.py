"""The JVM flags `bulletin up` and `bulletin worker` start Java with (bulletin._launch)."""

from pathlib import Path

from bulletin import _launch


def test_the_runtime_and_the_worker_get_a_fixed_young_generation(monkeypatch, tmp_path):
    monkeypatch.delenv("BULLETIN_JAVA_OPTS", raising=False)
    flags = _launch.default_jvm_flags()
    young = next(int(f[4:-1]) for f in flags if f.startswith("-Xmn"))
    assert 32 <= young <= 512
    assert f"-Xms{2 * young}m" in flags
    runtime = _launch.runtime_command("java", Path("x.jar"), tmp_path, _launch.UpOptions())
    worker = _launch.worker_command("java", Path("x.jar"), _launch.WorkerOptions(head="h:1"))
    for command in (runtime, worker):
        assert command[1:1 + len(flags)] == flags  # before -jar: flags of the JVM, not ours


def test_bulletin_java_opts_replaces_the_flags(monkeypatch, tmp_path):
    monkeypatch.setenv("BULLETIN_JAVA_OPTS", "-XX:+UseSerialGC  -Xmx2g")
    command = _launch.runtime_command("java", Path("x.jar"), tmp_path, _launch.UpOptions())
    assert command[1:3] == ["-XX:+UseSerialGC", "-Xmx2g"]
    assert not [f for f in command if f.startswith("-Xmn")]
    monkeypatch.setenv("BULLETIN_JAVA_OPTS", "")  # set but empty: the JVM's own defaults
    assert _launch.jvm_flags() == []
