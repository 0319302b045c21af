"""Stands in for `java -jar bulletin-runtime.jar` in the CLI tests.

Checks the launch contract of docs/internals.md (arguments, owner token in the environment),
serves LoopbackRuntime on --port and writes runtime.json like the real runtime does.
"""

import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def main() -> None:
    argv = sys.argv[1:]
    opts = dict(zip(argv[3::2], argv[4::2]))  # after: --add-opens=... -jar JAR
    home = Path(opts["--home"])
    (home / "fake-java-argv.json").write_text(json.dumps(argv))
    if os.environ.get("FAKE_JAVA_FAIL"):
        print("Exception in thread main: port already in use", flush=True)
        sys.exit(3)
    from loopback_runtime import LoopbackRuntime

    store = home / "store"
    store.mkdir(exist_ok=True)
    runtime = LoopbackRuntime(store, token=os.environ["BULLETIN_OWNER_TOKEN"],
                              gpus=int(opts["--simulate-gpus"]), port=int(opts["--port"]))
    signal.signal(signal.SIGTERM, lambda *_: runtime.shutdown_requested.set())
    info = {"address": runtime.address, "pid": os.getpid(), "cluster_id": "loopback",
            "store_dir": str(store), "version": "test"}
    tmp = home / "runtime.json.tmp"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, home / "runtime.json")
    print("serving", flush=True)
    runtime.shutdown_requested.wait()
    runtime.stop()


if __name__ == "__main__":
    main()
