"""The Papers page's Measured view: published rows, ccviz's prediction, the error table and the plot."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_measured_view_shows_rows_error_table_and_plot():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"page": "papers", "paper": "measured"})
    at.session_state["measured_filter"] = "dgxh100 1x8 GiB"
    at.run()
    assert at.dataframe[0].value["why not predicted"].str.startswith("not predicted yet").all()
    assert any("Press **Predict**" in i.value for i in at.info)
    at.button(key="measured_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.radio(key="papers_paper").value.startswith("Measured")
    errors, rows = at.dataframe[0].value, at.dataframe[1].value
    assert list(rows["size"]) == ["1GiB", "2GiB", "4GiB", "8GiB"]
    assert list(rows["measured busbw (GB/s)"]) == [466.35, 472.36, 475.54, 478.87]
    assert all(r.startswith("https://github.com/Azure/") for r in rows["source"])
    predicted = rows["ratio"].notna()
    assert (predicted | (rows["why not predicted"] != "")).all()  # every row is predicted or says why
    assert list(errors["size class"]) == [">=64MiB"]
    assert at.get("plotly_chart")
