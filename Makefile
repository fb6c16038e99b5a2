# Two set-up commands (see README): `make app` and `make test`. Both work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8501

.PHONY: app test install install-app install-test browser-deps lint bench clean notebook

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

# The app's own dependencies (Streamlit, streamlit-flow) come with the `app` extra.
install-app: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[app]"

# --no-compile: byte-compiling every installed module (12,455 files, 30 CPU-s here) is left to the first import,
# which the suite does for the few hundred it uses. MLCommons' Chakra reader (tests/test_chakra_official.py) goes
# in without its dependencies: its et_def_pb2 and reader need only protobuf, but the package declares
# HolisticTraceAnalysis and through it JupyterLab
install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-compile -e ".[test]"
	$(BIN)/python -m pip install --quiet --no-compile --no-deps "mlc-chakra>=1.0"

# Debian's chromium for the real-browser test (never `playwright install`).
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = "0" ]; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
			|| echo "warning: could not install chromium; the browser test will be skipped"; \
		else echo "warning: /usr/bin/chromium missing and not root; the browser test will be skipped"; fi; \
	fi

# MALLOC_ARENA_MAX: the server's session threads share 2 glibc arenas (fewer heaps for freed memory to sit in)
app: install-app
	MALLOC_ARENA_MAX=2 $(BIN)/streamlit run app.py --server.headless true --browser.gatherUsageStats false \
		--server.address 127.0.0.1 --server.port $(PORT)

# worksteal: an idle worker takes queued tests from a busy one, so minute-long tests never end the run on one
# core; --durations: every run prints its 25 slowest tests, so a test that grows is seen the day it does
test: install-test browser-deps
	$(BIN)/ruff check ccviz tests bench app.py pages
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto --dist worksteal --durations=25

# The quickstart notebook in JupyterLab (the `notebook` extra).
notebook: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[notebook]"
	$(BIN)/jupyter lab examples/quickstart.ipynb

lint: install-test
	$(BIN)/ruff check ccviz tests bench app.py pages

bench: install
	$(BIN)/python bench/simulator.py
	@for b in bench/scale.py bench/tacos.py bench/mteg.py bench/teccl.py; do [ -f $$b ] && $(BIN)/python $$b || true; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build *.egg-info
