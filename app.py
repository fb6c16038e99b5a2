"""ccviz workbench: `streamlit run app.py` (starts on DGX-1, nothing to set up).

The page scripts live in ``app_pages/``, not ``pages/``: Streamlit treats a
``pages/`` folder as the legacy multipage layout and, for a deep link opened
before anyone loaded ``/``, would run a page without this navigation.
"""

import streamlit as st

st.set_page_config(page_title="ccviz workbench", page_icon=":material/hub:", layout="wide")

pages = [
    st.Page("app_pages/synthesize.py", title="Synthesize", icon=":material/play_circle:", default=True),
    st.Page("app_pages/topology.py", title="Topology designer", icon=":material/hub:"),
    st.Page("app_pages/playback.py", title="Playback", icon=":material/movie:"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/monitoring:"),
    st.Page("app_pages/learn.py", title="Learn", icon=":material/school:"),
]
st.navigation(pages).run()
