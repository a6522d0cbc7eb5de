# make demo: the main job end to end.  make test: the tests.  Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL := 3

$(VENV)/.installed: setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

.PHONY: install demo test
install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/t5rank demo

test: $(VENV)/.installed
	$(PY) -m pytest -q tests
