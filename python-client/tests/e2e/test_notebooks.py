"""The notebooks of examples/notebooks, executed top to bottom at their CI size in a real Jupyter
kernel (nbclient), on the session's cluster: a cell that raises fails the test. The Dask and Ray
arms run where those are installed (`bulletin[bench]`) and are left out otherwise, as the
notebooks themselves do."""

from __future__ import annotations

import sys

import pytest

from cluster_support import REPO

sys.path.insert(0, str(REPO / "examples" / "notebooks"))
import run_notebooks  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("name", run_notebooks.NOTEBOOKS)
def test_the_notebook_runs_at_its_ci_size(cluster, name):
    path = REPO / "examples" / "notebooks" / name
    nb = run_notebooks.execute(path, {"size": "ci", "address": cluster.address,
                                      "token": cluster.token}, timeout=240)
    errors = [out for cell in nb.cells for out in cell.get("outputs", [])
              if out.get("output_type") == "error"]
    assert errors == []
    assert any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")
