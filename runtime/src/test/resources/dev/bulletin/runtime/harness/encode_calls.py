"""Encodes the harness's test calls the way bulletin.Client does, for the JVM tests.

Run by PythonCalls with the project's venv: reads a JSON list of calls on stdin,
[{"name": ..., "function": ..., "args": [...], "returns": value (optional)}], and writes into
the folder given as argv[1], per call: NAME.function (the function, encoded like
Client.submit encodes it: the Arrow codec's "pickle" kind, by value because it lives in
__main__), NAME.args (the (args, kwargs) tuple, likewise) and, when "returns" is given,
NAME.result: the bytes an executor writes for that return value; and manifest.json, the
content ids: NAME -> {"function": id, "args": id, "result": id}.
"""

import json
import os
import sys
import time
from pathlib import Path

from bulletin._data._objects import encode


def add(a, b):
    return a + b


def sleep(seconds):
    time.sleep(seconds)
    return seconds


def fail(message):
    raise ValueError(message)


def write_pid(pid_file):
    """Names the executor that ran the call (its process id)."""
    temp = pid_file + ".tmp"
    with open(temp, "w") as out:
        out.write(str(os.getpid()))
    os.replace(temp, pid_file)  # the reader never sees half a pid
    return "ok"


def write_pid_and_wait(pid_file, gate, seconds):
    """Runs until the gate file exists (or `seconds` pass): a call the test holds running."""
    write_pid(pid_file)
    deadline = time.monotonic() + seconds
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    return "released"


def main():
    out = Path(sys.argv[1])
    manifest = {}
    for call in json.load(sys.stdin):
        name = call["name"]
        function = encode(globals()[call["function"]])
        args = encode((tuple(call["args"]), {}))
        entry = {"function": function.digest(), "args": args.digest()}
        (out / f"{name}.function").write_bytes(function.to_bytes())
        (out / f"{name}.args").write_bytes(args.to_bytes())
        if "returns" in call:
            result = encode(call["returns"])
            (out / f"{name}.result").write_bytes(result.to_bytes())
            entry["result"] = result.digest()
        manifest[name] = entry
    (out / "manifest.json").write_text(json.dumps(manifest))


if __name__ == "__main__":
    main()
