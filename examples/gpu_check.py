"""The GPU path on a real GPU machine, checked end to end against a local cluster.

    python examples/gpu_check.py            # starts `bulletin up` (real GPUs via nvidia-smi)

What it checks, each printed as CHECK <name>: ok|FAILED <why>:
- the runtime found the machine's GPUs (not simulated) and a gpus=1 call runs pinned to one
  (CUDA_VISIBLE_DEVICES names one GPU, and torch sees exactly one device);
- a CUDA tensor round trip: a tensor made on the GPU in the notebook goes to a call (as its CPU
  copy, as the codec documents), which adds one on its GPU and returns it: equal on return;
- two gpus=0.5 calls share one GPU at the same time (each sees the same device, both run
  together), and each is held to half of the GPU's memory by PyTorch's allocator: allocating
  60 % of the GPU in a half-GPU call fails with torch.cuda.OutOfMemoryError, 40 % succeeds;
- a call of 1 GiB of fresh GPU memory returned to the caller: its time, with the time of
  torch's own device-to-host copy beside it;
- a ``%%bulletin gpus=1`` cell (IPython's own shell, in process) trains a small module on its
  GPU: the cell saw a CUDA device, its print showed, the summary line named the GPU, and the
  module stayed on the GPU as a handle (``bulletin.Resident``) that a second cell trains further
  with nothing but the handle sent;
- resident state between two users on one GPU (a cluster of its own, users alice and bob):
  alice keeps 2 GiB on the GPU (``@bulletin.gpu(keep=True)``); her next call finds the same object in the same
  process; bob's call then takes the GPU: alice's state is spilled and her process ended first,
  so bob's call sees her 2 GiB free on the device (``torch.cuda.mem_get_info``) and her process
  gone; alice's next call finds her value restored, equal.
Exits 1 if any check failed. Needs torch with CUDA on the machine.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import bulletin  # noqa: E402
from _local_cluster import local_cluster  # noqa: E402

FAILED: list[str] = []


def check(name: str, ok: bool, why: str = "") -> None:
    print(f"CHECK {name}: {'ok' if ok else 'FAILED ' + why}", flush=True)
    if not ok:
        FAILED.append(name)


def where_am_i():
    import torch
    return (os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count(),
            torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)


def add_one_on_gpu(t):
    """A CUDA tensor arrives as its CPU copy (docs/data-plane.md): the call moves it."""
    on_gpu = t.cuda() + 1
    return str(on_gpu.device), on_gpu


def meet(path: str, wait_for: str, seconds: float):
    """Marks that this call runs, then waits (up to ``seconds``) for ``wait_for`` to exist."""
    import torch
    open(path, "w").close()
    deadline = time.time() + seconds
    while not os.path.exists(wait_for) and time.time() < deadline:
        time.sleep(0.02)
    return os.path.exists(wait_for), os.environ.get("CUDA_VISIBLE_DEVICES"), \
        torch.cuda.get_device_name(0)


def allocate(share: float):
    """Allocates ``share`` of the GPU's total memory; says whether PyTorch allowed it."""
    import torch
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        block = torch.empty(int(total * share), dtype=torch.uint8, device="cuda")
        del block
        return "allocated"
    except torch.cuda.OutOfMemoryError as error:
        return f"refused: {str(error).splitlines()[0][:160]}"


def fresh_gib(n: int):
    import torch
    return torch.ones(n, dtype=torch.uint8, device="cuda")


CELL = """\
%%bulletin gpus=1
import torch
net = torch.nn.Linear(64, 1).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(256, 64, device="cuda"), torch.randn(256, 1, device="cuda")
for step in range(50):
    loss = torch.nn.functional.mse_loss(net(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print("trained on", torch.cuda.get_device_name(0))
device, final = str(next(net.parameters()).device), float(loss)
"""


CELL_AGAIN = """\
%%bulletin gpus=1
for step in range(50):
    loss = torch.nn.functional.mse_loss(net(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
again = float(loss)
"""


def cell_check() -> None:
    import contextlib
    import io

    from IPython.testing.globalipapp import get_ipython
    shell = get_ipython()
    shell.run_cell("%load_ext bulletin")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = shell.run_cell(CELL)
    ns, out = shell.user_ns, printed.getvalue()
    print(out, end="")
    net = ns.get("net")
    ok = (result.error_in_exec is None and ns.get("device", "").startswith("cuda")
          and "trained on" in out and ", GPU " in out and isinstance(net, bulletin.Resident)
          and net.device.startswith("cuda"))
    check("a %%bulletin gpus=1 cell trains on its GPU and its module stays there as a handle",
          ok, f"error={result.error_in_exec!r} device={ns.get('device')} net={net!r} "
              f"output={out!r}")
    again = shell.run_cell(CELL_AGAIN)
    run = bulletin.cell_runs()[-1]
    print(f"the second cell: sent {run.sent_bytes} bytes, ran {run.ran_s:.3f} s, held "
          f"{run.held_s:.3f} s, loss {ns.get('final')} -> {ns.get('again')}")
    check("a second cell trains the resident module, sending only handles",
          again.error_in_exec is None and run.sent_bytes < 64 << 10
          and ns.get("again", 1e9) < ns.get("final", 0), f"error={again.error_in_exec!r} "
          f"sent={run.sent_bytes} loss {ns.get('final')} -> {ns.get('again')}")


ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdefgh"


def fill_gib(n: int):
    import torch
    return torch.full((n << 28,), 7.25, device="cuda")  # float32: n GiB


def touch(t, add: float = 0.0):
    """(pid, id of the value, its first element): the same pid and id: the same object."""
    import os
    t += add
    return os.getpid(), id(t), float(t[0])


def device_free_and_alive(pid: int):
    """(free bytes, total bytes, whether process pid lives): bob's view of the GPU."""
    import os
    import torch
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    except PermissionError:  # another account's process: it exists
        alive = True
    return free, total, alive


def resident_check() -> None:
    import tempfile
    config = os.path.join(tempfile.mkdtemp(prefix="bulletin-gpu-check-"), "users.yaml")
    with open(config, "w") as f:
        f.write(f"users:\n  - {{name: alice, group: a, token: \"{ALICE}\"}}\n"
                f"  - {{name: bob, group: b, token: \"{BOB}\"}}\n")
    with local_cluster(reuse=False, up_args=("--config", config, "--gpus", "1")) as owner, \
            bulletin.Client(owner.address, token=ALICE, set_as_default=False) as alice, \
            bulletin.Client(owner.address, token=BOB, set_as_default=False) as bob:
        kept = alice.submit(bulletin.gpu(keep=True)(fill_gib), 2).result(timeout=300)
        check("alice keeps 2 GiB on the GPU as a handle", isinstance(kept, bulletin.Resident)
              and kept.device.startswith("cuda") and kept.nbytes == 2 << 30, repr(kept))
        first = alice.submit(bulletin.gpu(touch), kept, 1.0).result(timeout=120)
        second = alice.submit(bulletin.gpu(touch), kept).result(timeout=120)
        check("her next call finds the same object in the same process",
              first[:2] == second[:2] and second[2] == 8.25, f"{first} then {second}")
        free, total, alive = bob.submit(bulletin.gpu(device_free_and_alive),
                                        first[0]).result(timeout=300)
        print(f"bob's call: {free / 2**30:.1f} of {total / 2**30:.1f} GiB free on the device, "
              f"alice's executor alive: {alive}")
        check("bob's call finds alice's 2 GiB released and her process gone",
              not alive and free > total - (3 << 29), f"free {free}, total {total}, "
              f"alive {alive}")
        back = alice.submit(bulletin.gpu(touch), kept).result(timeout=300)
        check("alice's value is restored for her next call, equal",
              back[2] == 8.25 and back[0] != first[0], f"{back}")


def main() -> int:
    import torch
    if not torch.cuda.is_available():
        print("no CUDA here: this check runs on a GPU machine", file=sys.stderr)
        return 2
    with local_cluster(reuse=False) as client:
        status = client.status()
        print(f"cluster: {status.gpus.total} GPU(s), simulated={status.simulated_gpus}")
        check("real GPUs found", status.gpus.total >= 1 and not status.simulated_gpus,
              f"{status.gpus.total} GPUs, simulated={status.simulated_gpus}")

        visible, count, name = client.submit(where_am_i, gpus=1).result(timeout=120)
        print(f"a gpus=1 call: CUDA_VISIBLE_DEVICES={visible}, {count} device(s), {name}")
        check("a gpus=1 call is pinned to one GPU", visible is not None and count == 1
              and "," not in visible, f"CUDA_VISIBLE_DEVICES={visible}, {count} devices")

        t = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
        device, back = client.submit(add_one_on_gpu, t, gpus=1).result(timeout=120)
        equal = torch.equal(back.cuda(), t + 1)
        check("CUDA tensor round trip", device.startswith("cuda") and equal,
              f"ran on {device}, equal={equal}")

        home = os.environ.get("BULLETIN_HOME", "/tmp")
        a_runs, b_runs = os.path.join(home, "a-runs"), os.path.join(home, "b-runs")
        a = client.submit(meet, a_runs, b_runs, 60, gpus=0.5)
        b = client.submit(meet, b_runs, a_runs, 60, gpus=0.5)
        (a_met, a_dev, _), (b_met, b_dev, gpu) = a.result(timeout=120), b.result(timeout=120)
        print(f"two gpus=0.5 calls: met={a_met and b_met}, devices {a_dev} and {b_dev} ({gpu})")
        check("two half-GPU calls share one GPU at once", a_met and b_met and a_dev == b_dev,
              f"met={a_met},{b_met} devices={a_dev},{b_dev}")

        over = client.submit(allocate, 0.6, gpus=0.5).result(timeout=120)
        under = client.submit(allocate, 0.4, gpus=0.5).result(timeout=120)
        print(f"a half-GPU call allocating 60 %: {over}; 40 %: {under}")
        check("a half-GPU call is held to its half", over.startswith("refused")
              and under == "allocated", f"60 %: {over}; 40 %: {under}")
        whole = client.submit(allocate, 0.6, gpus=1).result(timeout=120)
        check("a whole-GPU call is not", whole == "allocated", whole)

        n = 1 << 30
        client.submit(fresh_gib, 1 << 20, gpus=1).result(timeout=120)  # warm
        rounds, whole = [], True
        for _ in range(3):
            start = time.perf_counter()
            got = client.submit(fresh_gib, n, gpus=1).result(timeout=300)
            rounds.append(time.perf_counter() - start)
            whole = whole and got.numel() == n and bool(got[0] == 1) and bool(got[-1] == 1)
            del got
        local = []
        for _ in range(3):
            start = time.perf_counter()
            x = torch.ones(n, dtype=torch.uint8, device="cuda").cpu()
            torch.cuda.synchronize()
            local.append(time.perf_counter() - start)
            del x
        print(f"a call returning 1 GiB of new GPU memory: best {min(rounds):.3f} s "
              f"(rounds {', '.join(f'{r:.3f}' for r in rounds)}); torch.ones(1 GiB).cpu() here: "
              f"best {min(local):.3f} s; ratio {min(rounds) / min(local):.2f}x")
        check("a 1 GiB CUDA result arrives whole", whole, "wrong size or content")
        cell_check()
    resident_check()
    print(f"{len(FAILED)} check(s) failed: {FAILED}" if FAILED else "all checks ok")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
