# `make run`: set up .venv (created or refreshed) and run the default scenario.
# `make test`: same set-up, then the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SCENARIO ?= examples/megascale-175b-12288.yaml
# The set-up prints nothing but errors: pip at -qq (this also hides a machine's own pip
# configuration notices), and setuptools' notice that an editable install is editable.
PIP_QUIET := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install -qq

.PHONY: run test venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@echo "setting up $(VENV) (first run, or pyproject.toml changed) ..."
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(PIP_QUIET) --upgrade pip
	@$(PIP_QUIET) -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	@$(BIN)/clustersim simulate $(SCENARIO)

# one pytest worker per core (pytest-xdist), each test file on one worker (its module
# fixtures computed once)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadfile

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
