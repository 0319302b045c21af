"""Executes the notebooks of this folder headless, papermill-style, on a cluster of their own.

    make bench-notebooks                                       # real size, executed copies kept
    python examples/notebooks/run_notebooks.py --size ci       # the CI size, nothing written
    python examples/notebooks/run_notebooks.py --size real --write offload_overhead.ipynb

Each notebook has one code cell tagged ``parameters`` (``size``, ``address``, ``token``,
``peers``, ...). The values given here go into a cell tagged ``injected-parameters`` placed right
after it (as papermill does), the notebook runs top to bottom in a fresh Jupyter kernel, and a
cell that raises fails the run, naming the notebook and the cell. ``--write`` saves the executed
notebook (outputs and plots included) over the original. The pytest suite
(python-client/tests/e2e/test_notebooks.py) runs every notebook at the CI size through
``execute``.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
NOTEBOOKS = ("quickstart.ipynb", "offload_overhead.ipynb", "data_movement.ipynb",
             "cell_offload.ipynb")
INJECTED = "injected-parameters"


def notebook_paths(names=()) -> list[Path]:
    return [HERE / name for name in (names or NOTEBOOKS)]


def with_parameters(nb, parameters: dict):
    """A copy of ``nb`` with ``parameters`` assigned in a cell right after its parameters cell
    (any earlier injected cell replaced)."""
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if INJECTED not in c.get("metadata", {}).get("tags", [])]
    marked = [i for i, c in enumerate(nb.cells)
              if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(marked) != 1:
        raise ValueError(f"a notebook needs exactly one cell tagged 'parameters', this one has "
                         f"{len(marked)}")
    source = "# Injected by run_notebooks.py\n" + "".join(
        f"{name} = {value!r}\n" for name, value in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [INJECTED]})
    nb.cells.insert(marked[0] + 1, cell)
    return nb


def execute(path: Path, parameters: dict, *, timeout: float = 1800, write: bool = False):
    """Runs the notebook at ``path`` with ``parameters`` in a fresh kernel whose working folder
    is the notebook's; returns the executed notebook (and saves it over ``path`` if ``write``).
    A cell error raises nbclient's CellExecutionError, which names the cell and the error."""
    nb = with_parameters(nbformat.read(path, as_version=4), parameters)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    if write:
        nbformat.write(nb, path)
    return nb


def parse_param(text: str) -> tuple[str, object]:
    name, eq, value = text.partition("=")
    if not eq or not name.isidentifier():
        raise SystemExit(f"--param {text!r}: expected NAME=VALUE, e.g. --param repeats=1")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise SystemExit(f"--param {text!r}: the value must be a Python literal "
                         f"(a number, a quoted string, a tuple, None)") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help=f"default: {' '.join(NOTEBOOKS)}")
    parser.add_argument("--size", choices=("ci", "real"), default="real")
    parser.add_argument("--write", action="store_true",
                        help="save the executed notebooks (with outputs) over the originals")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="another parameter, a Python literal (--param repeats=1); "
                             "a notebook that does not have it ignores it")
    parser.add_argument("--cpus", type=int, default=0,
                        help="the CPU slots of the cluster started for them (default: all)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    from _local_cluster import local_cluster

    # The kernels find the cluster as any client does: local_cluster sets $BULLETIN_HOME.
    with local_cluster(cpus=args.cpus, reuse=False):
        parameters = {"size": args.size, **dict(parse_param(p) for p in args.param)}
        for path in notebook_paths(args.notebooks):
            start = time.monotonic()
            print(f"{path.name} ({args.size} size) ...", flush=True)
            execute(path, parameters, write=args.write)
            print(f"{path.name}: ran in {time.monotonic() - start:.0f} s"
                  + (", executed copy written" if args.write else ""), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    main()
