"""Where bulletin's fixed cost of one training call goes: the offload_overhead notebook's ResNet18
``train`` through bulletin against the same function in this process, stage by stage.

    python examples/offload_breakdown.py                      # 128 images, 1 thread, 5 repeats
    python examples/offload_breakdown.py --images 1024 --repeats 3

The function, its model and its data are the notebook's own (its cell that defines ``train`` is
run here, in ``__main__``, so the model classes are pickled by value as in a kernel). Local and
remote runs alternate, and every figure is a median over the repeats: on a shared machine the
training itself varies by tens of percent from one run to the next, so the stages are timed
directly rather than read off the difference of two walls. A stage's seconds:

- client: pickling and upload of the arguments (Future.timings serialize + upload);
- queue, start: the runtime's (Future.timings), the start being the dispatch to a warm executor;
- in the call, not training: the executor's run (Future.timings run) less the training loop the
  function times itself (model construction, state_dict): compare with the local row;
- result to client: from the function's return to the Future being done, less the above (the
  executor encodes and writes the ~45 MB state_dict into the shared-memory store, the runtime
  tells the client), then ``download``: the client maps it and decodes the tensors.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

NOTEBOOK = os.path.join(os.path.dirname(__file__), "notebooks", "offload_overhead.ipynb")


def notebook_train(images: int):
    """Runs the notebook's cell that defines ``train`` (and makes its data) in ``__main__``."""
    with open(NOTEBOOK, encoding="utf-8") as f:
        cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code"]
    source = next("".join(c["source"]) for c in cells if "def train(" in "".join(c["source"]))
    import torch
    from torch import nn
    namespace = sys.modules["__main__"].__dict__
    namespace.update(torch=torch, nn=nn, cfg={"images": images})
    exec(compile(source, NOTEBOOK, "exec"), namespace)  # noqa: S102 - our own notebook
    return namespace["train"], namespace["images"], namespace["labels"]


def probe_threads():
    import torch
    return torch.get_num_threads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gpus", type=int, default=1, help="per call, as in the notebook")
    args = parser.parse_args()
    import torch
    train, images, labels = notebook_train(args.images)
    local_default = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    from _local_cluster import local_cluster

    with local_cluster() as client:
        remote_default = client.submit(probe_threads, gpus=args.gpus).result()
        print(f"torch threads by default: here {local_default}, in the executor "
              f"{remote_default}; every run sets {args.threads}")
        fit = (args.batch, args.threads)
        for _ in range(2):  # warm-up: the executor's imports, the first model on both sides
            train(images, labels, 0, *fit)
            client.submit(train, images, labels, 0, *fit, gpus=args.gpus).result()
        local, remote = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            trained = train(images, labels, 1, *fit)[2]
            wall = time.perf_counter() - start
            local.append(dict(wall=wall, trained=trained, not_training=wall - trained))

            start = time.perf_counter()
            future = client.submit(train, images, labels, 1, *fit, gpus=args.gpus)
            future.exception()  # done: the result is at the client (mapped on first use)
            done = time.perf_counter() - start
            trained = future.result()[2]
            wall = time.perf_counter() - start
            t = future.timings
            remote.append(dict(
                wall=wall, trained=trained, not_training=t["run"] - trained,
                client=t["serialize"] + t["upload"], queue=t["queue"], start=t["start"],
                result=done - t["serialize"] - t["upload"] - t["queue"] - t["start"] - t["run"],
                download=t["download"]))

    def med(rows, key):
        return statistics.median(r[key] for r in rows)

    lw, rw = med(local, "wall"), med(remote, "wall")
    print(f"\nResNet18, 1 epoch of {args.images} images, batch {args.batch}, {args.threads} "
          f"thread(s); medians of {args.repeats} runs, seconds\n")
    print("| stage | local | bulletin |\n|---|---:|---:|")
    rows = [("client: pickle + upload arguments", None, "client"),
            ("runtime: queue", None, "queue"), ("runtime: start (warm executor)", None, "start"),
            ("in the call, not training (model, state_dict)", "not_training", "not_training"),
            ("training loop", "trained", "trained"),
            ("result: encode, store, event to client", None, "result"),
            ("result: map and decode at the client", None, "download"),
            ("wall", "wall", "wall")]
    for label, lkey, rkey in rows:
        lval = f"{med(local, lkey):.4f}" if lkey else "-"
        print(f"| {label} | {lval} | {med(remote, rkey):.4f} |")
    fixed = sum(med(remote, k) for k in ("client", "queue", "start", "result", "download"))
    print(f"\nbulletin's fixed stages: {fixed * 1000:.0f} ms, {fixed / lw * 100:.1f} % of the local "
          f"wall; wall ratio bulletin/local {rw / lw:.3f} (training loop "
          f"{med(remote, 'trained') / med(local, 'trained'):.3f})")


if __name__ == "__main__":
    main()
