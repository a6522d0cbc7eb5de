# make demo: the main job end to end.  make test: the tests.  Both create .venv on first use.
VENV ?= .venv
# test processes (pytest-xdist), each file's tests in one of them: most tests are compile- and
# Python-bound, one core each; TEST_WORKERS=0 runs them in make's own pytest (for --pdb, -s)
TEST_WORKERS ?= 2
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL := 3

# The install: uv (from PyPI) fetches, unpacks and byte-compiles the packages in parallel, about a
# minute sooner than pip on 2 cores; pip where pip is pointed at an index of its own (uv reads
# neither pip.conf nor PIP_INDEX_URL), where uv fails, or with INSTALLER=pip.
INSTALLER ?= uv
$(VENV)/.installed: setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	if [ "$(INSTALLER)" = uv ] && [ -z "$${PIP_INDEX_URL:-}" ] \
	    && ! $(PY) -m pip config list 2>/dev/null | grep -q '\.index-url=' \
	    && $(PY) -m pip install -q uv \
	    && $(VENV)/bin/uv pip install -q --python $(PY) --compile-bytecode -P pip pip -e '.[test]'; \
	then :; else \
	  $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[test]'; \
	fi
	touch $@

.PHONY: install demo test
install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/t5rank demo

test: $(VENV)/.installed
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 tests
