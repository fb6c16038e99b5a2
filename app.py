"""ccviz workbench: `streamlit run app.py` (starts on DGX-1, nothing to set up).

The page scripts live in ``pages/`` and this script lays out the navigation.
Each page also configures itself (``app_ui.configure_page``), so it renders
the same when Streamlit runs it directly: with a ``pages/`` folder present,
the very first request a fresh server gets for a deep link (``/topology``)
goes through Streamlit's older multipage mode before ``st.navigation`` runs.
"""

import streamlit as st

from ccviz.app_ui import configure_page

configure_page()

pages = [
    st.Page("pages/synthesize.py", title="Synthesize", icon=":material/play_circle:", default=True),
    st.Page("pages/topology.py", title="Topology designer", icon=":material/hub:"),
    st.Page("pages/playback.py", title="Playback", icon=":material/movie:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/monitoring:"),
    st.Page("pages/papers.py", title="Papers", icon=":material/menu_book:"),
    st.Page("pages/learn.py", title="Learn", icon=":material/school:"),
]
st.navigation(pages).run()
