"""The Streamlit app's side of ccviz: session state, background runs, shared widgets, the designer.

Only ``app.py`` and ``pages/`` import this package; the library and the CLI never do, so they run
without Streamlit (install it with the ``app`` extra: ``pip install -e ".[app]"``, or ``make app``).
The app only calls the library: a solve starts in ``ccviz.app.runs.SynthesisJob`` (a background thread
that runs ``ccviz.runs.pipeline.run`` in a worker process of ``ccviz.runs.isolated``) and a Compare sweep in
``ccviz.app.runs.SweepJob`` (a worker process, or the ``ccviz.runs.sweep`` engine).
"""
