"""ccviz workbench: `streamlit run app.py` (starts on DGX-1, nothing to set up)."""

import streamlit as st

st.set_page_config(page_title="ccviz workbench", page_icon=":material/hub:", layout="wide")

pages = [
    st.Page("pages/synthesize.py", title="Synthesize", icon=":material/play_circle:", default=True),
    st.Page("pages/topology.py", title="Topology designer", icon=":material/hub:"),
    st.Page("pages/playback.py", title="Playback", icon=":material/movie:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/monitoring:"),
    st.Page("pages/learn.py", title="Learn", icon=":material/school:"),
]
st.navigation(pages).run()
