# The two-speed loop (CONTRIBUTING.md). `make check` is the fast one: ruff, mypy and the tests
# marked `fast` (in-process, or the CLI on a sandbox --root); no Go, containerd, booted root or
# package build. `make test` is the README's test command: the whole suite, strict.
# Both expect the .venv that `bash .ci/setup` makes.

PY ?= .venv/bin/python
PYTEST_ARGS ?= -q

.PHONY: check lint typecheck fast test demo

check: lint typecheck fast

lint:
	$(PY) -m ruff check staticpodd tests

typecheck:
	$(PY) -m mypy staticpodd

fast:
	$(PY) -m pytest -m fast -p no:cacheprovider $(PYTEST_ARGS)

test:
	bash .ci/test $(PYTEST_ARGS)

demo:
	bash .ci/demo
