"""The Jupyter quickstart runs top to bottom (its code cells, in order, in one namespace)."""

from __future__ import annotations

import json

import plotly.graph_objects as go

from tests.paths import ROOT


def test_quickstart_notebook_runs():
    notebook = json.loads((ROOT / "examples" / "quickstart.ipynb").read_text())
    namespace: dict = {}
    figures = 0
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        *body, last = source.strip().splitlines()
        exec("\n".join(body), namespace)  # noqa: S102 - our own notebook
        value = eval(last.split("#")[0], namespace) if not last.startswith(("import", "from")) else None  # noqa: S307
        figures += isinstance(value, go.Figure)
    assert figures >= 4
    assert namespace["result"].timeline.verified
    assert namespace["table"]["verified"].all()
