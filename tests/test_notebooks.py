"""Every notebook runs top to bottom, and is stored without outputs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def test_there_are_the_seven_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, \
                f"{path.name}: strip outputs before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    # every figure is drawn, and once: no bare "<Figure ...>" text, no image twice in a cell
    for k, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        data = [o.get("data", {}) for o in cell.outputs]
        bare = [d for d in data if "image/png" not in d
                and d.get("text/plain", "").startswith("<Figure")]
        images = [d["image/png"] for d in data if "image/png" in d]
        assert not bare, f"{path.name} cell {k}: a figure shown as text"
        assert len(images) == len(set(images)), f"{path.name} cell {k}: a figure shown twice"
