"""ccviz workbench: `streamlit run app.py` (starts on DGX-1, nothing to set up).

The page scripts live in ``pages/`` and are registered in ``PAGES`` below
(the one place a new page is added). Each page also configures itself
(``ccviz.app.ui.configure_page``): with a ``pages/`` folder present, the very
first request a fresh server gets for a deep link (``/topology``) goes through
Streamlit's older multipage mode, which runs the page file alone and lists
pages/ by file name; the page then hands itself over to this file's
``st.navigation`` (one rerun, the same URL).

A link's query parameters (``?topology=torus2d:dims=4x4&collective=alltoall
&algorithm=tacos&size=4MB&chunks=2&page=compare``) are applied once per
session (``ccviz.app.url``); every page writes its state back into the URL.
"""

import streamlit as st

from ccviz.app import url
from ccviz.app.advise_panel import remember_link
from ccviz.app.state import show_errors
from ccviz.app.ui import configure_page

# name in the URL -> page (the first is the landing page)
PAGES = {
    "synthesize": st.Page("pages/synthesize.py", title="Synthesize", icon=":material/play_circle:", default=True),
    "topology": st.Page("pages/topology.py", title="Topology designer", icon=":material/hub:"),
    "playback": st.Page("pages/playback.py", title="Playback", icon=":material/movie:"),
    "compare": st.Page("pages/compare.py", title="Compare", icon=":material/monitoring:"),
    "papers": st.Page("pages/papers.py", title="Papers", icon=":material/menu_book:"),
    "learn": st.Page("pages/learn.py", title="Learn", icon=":material/school:"),
    "workload": st.Page("pages/workload.py", title="Workload", icon=":material/groups:"),
}


def main() -> None:
    remember_link()  # the designer advisor's mix and budget, before the URL is rewritten (unknown keys dropped)
    configure_page(from_navigation=True)
    wanted = url.wanted_page()
    page = st.navigation(list(PAGES.values()))
    if wanted in PAGES and PAGES[wanted].title != page.title:
        st.switch_page(PAGES[wanted])
    name = next((k for k, p in PAGES.items() if p.title == page.title), None)
    url.share(name)
    show_errors("url")
    page.run()


# Streamlit runs this file as __main__; a process started by "spawn" (Dask's embedded sweep cluster) re-imports
# it as __mp_main__, where there is no app to run.
if __name__ == "__main__":
    main()
