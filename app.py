"""ccviz workbench: `streamlit run app.py` (starts on DGX-1, nothing to set up)."""

import streamlit as st

st.set_page_config(page_title="ccviz workbench", page_icon="🔀", layout="wide")

pages = [
    st.Page("pages/synthesize.py", title="Synthesize", icon="⚙️", default=True),
    st.Page("pages/topology.py", title="Topology designer", icon="🕸️"),
    st.Page("pages/playback.py", title="Playback", icon="▶️"),
    st.Page("pages/compare.py", title="Compare", icon="📈"),
    st.Page("pages/learn.py", title="Learn", icon="🎓"),
]
st.navigation(pages).run()
