"""`python -m bulletin._runtime._executor` driven by a real Py4J callback client in a small Java program.

The Java side mirrors the worker agent's launch contract (docs/internals.md): the token on the
executor's stdin, its announcement on stdout, then run/ping calls through Py4J's callback
direction only, and end of file on stdin to stop it. Skipped where no JDK is installed.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

from py4j.java_gateway import find_jar_path

from bulletin._data._objects import encode, open_object

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")

AGENT = r'''
import dev.bulletin.worker.PythonExecutor;
import java.io.*;
import java.nio.charset.StandardCharsets;
import py4j.CallbackClient;
import py4j.Gateway;

public class Agent {
  public static void main(String[] args) throws Exception {
    String token = "t0ken-" + System.nanoTime();
    ProcessBuilder pb = new ProcessBuilder(args[0], "-m", "bulletin._runtime._executor")
        .redirectError(ProcessBuilder.Redirect.INHERIT);
    pb.environment().put("BULLETIN_STORE_DIR", args[1]);
    pb.environment().put("PYTHONUNBUFFERED", "1");
    Process python = pb.start();
    OutputStream stdin = python.getOutputStream();
    stdin.write((token + "\n").getBytes(StandardCharsets.US_ASCII));
    stdin.flush();
    BufferedReader out = new BufferedReader(new InputStreamReader(python.getInputStream(),
        StandardCharsets.UTF_8));
    String ready = out.readLine();
    System.out.println("ANNOUNCED " + ready.substring(1));
    String[] parts = ready.substring(1).split(" ");
    Gateway gateway = new Gateway(null, new CallbackClient(Integer.parseInt(parts[1]),
        java.net.InetAddress.getLoopbackAddress(), token));
    PythonExecutor executor = (PythonExecutor) gateway.createProxy(
        Agent.class.getClassLoader(), new Class<?>[] {PythonExecutor.class}, parts[2]);
    System.out.println("PING " + executor.ping());
    String call = "{\"task\": \"task-1\", \"function\": \"" + args[1] + "/" + args[2]
        + "\", \"args\": \"" + args[1] + "/" + args[3] + "\", \"refs\": {}, \"result\": \""
        + args[1] + "/.result-task-1\"}";
    System.out.println("RUN " + executor.run(call));
    String line;
    while ((line = out.readLine()) != null && !line.contains("BULLETIN-END")) {
      System.out.println(line);
    }
    System.out.println(line);
    System.out.flush();
    stdin.close();  // the executor's lifeline: end of file, it exits
    gateway.shutdown();
    System.out.println("EXIT " + (python.waitFor(20, java.util.concurrent.TimeUnit.SECONDS)
        ? python.exitValue() : -1));
  }
}
'''

PYTHON_EXECUTOR = '''
package dev.bulletin.worker;
public interface PythonExecutor { String run(String call); String commit(boolean staged); String ping(); }
'''


def greet(name):
    print(f"hello {name}")
    return name.upper()


@pytest.fixture(scope="module")
def agent_classes(tmp_path_factory):
    src = tmp_path_factory.mktemp("agent")
    (src / "dev/bulletin/worker").mkdir(parents=True)
    (src / "dev/bulletin/worker/PythonExecutor.java").write_text(PYTHON_EXECUTOR)
    (src / "Agent.java").write_text(AGENT)
    jar = find_jar_path()
    if not jar:
        pytest.skip("the py4j jar is not installed (share/py4j)")
    subprocess.run(["javac", "-cp", str(jar), "-d", str(src), str(src / "Agent.java"),
                    str(src / "dev/bulletin/worker/PythonExecutor.java")], check=True)
    return f"{src}{os.pathsep}{jar}"


def put(store: Path, obj) -> str:
    encoded = encode(obj)
    (store / encoded.digest()).write_bytes(encoded.to_bytes())
    return encoded.digest()


def test_executor_announces_itself_runs_a_call_and_exits_when_stdin_closes(agent_classes,
                                                                             tmp_path):
    fid, aid = put(tmp_path, greet), put(tmp_path, (("py4j",), {}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    proc = subprocess.run(["java", "-cp", agent_classes, "Agent", sys.executable, str(tmp_path),
                           fid, aid], capture_output=True, text=True, timeout=60, env=env)
    out = proc.stdout
    assert "ANNOUNCED BULLETIN-READY " in out, proc.stderr
    assert "PING pong" in out, proc.stderr
    run_line = next(line for line in out.splitlines() if line.startswith("RUN "))
    reply = json.loads(run_line[4:])
    assert reply["kind"] == "finished" and reply["raised"] is False
    assert open_object(tmp_path / ".result-task-1") == "PY4J"
    assert "hello py4j\n\x1eBULLETIN-END task-1\n" in out
    assert "\x1eBULLETIN-END task-1\n" in proc.stderr
    assert "EXIT 0" in out
    assert "Traceback" not in proc.stderr


def test_executor_without_a_token_on_stdin_says_who_starts_it(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bulletin._runtime._executor"], input="",
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, BULLETIN_STORE_DIR=str(tmp_path)))
    assert proc.returncode == 2
    assert "no callback token on stdin" in proc.stderr
