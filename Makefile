# The two README commands: `make demo` (the whole pipeline on the demo model, on CPU)
# and `make test` (lint, format check, the whole test suite). Both are idempotent.
PYTHON ?= python3
VENV ?= .venv
# The torch to put in a fresh venv. The default is the CPU build this project is
# developed on; the project itself only declares a floor (torch>=2.1) so that a
# ROCm or CUDA image keeps its own torch.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup demo test lint tools dist image clean mutation

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[dev,onnx,report]"
	touch $@

demo: setup
	@# exit 3 (passed with warnings) is a verdict too: the banner above says which gates warned
	@# the history store makes a second run compare itself with the first
	$(BIN)/gatekeeper pipeline --device cpu --out artifacts \
	  --baseline sqlite:.gatekeeper/history.db --record sqlite:.gatekeeper/history.db; \
	  rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 3 ]

tools:
	bash scripts/setup_test_tools.sh

# The wheel and sdist of a release, in dist/ (the tag pipeline builds and publishes the same).
dist: setup
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# The OCI image with gatekeeper preinstalled (IMAGE=cpu or rocm; ROCM_BASE_IMAGE picks the
# rocm/pytorch base). Without docker or podman it prints "skipped: ..." and exits 0.
IMAGE ?= cpu
IMAGE_REPOSITORY ?= gatekeeper
image: dist
	sh scripts/build_image.sh $(IMAGE) $(IMAGE_REPOSITORY)

# ruff (style), import-linter (the layers in pyproject.toml), mypy (annotations of gatekeeper/ and stages/)
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

test: setup tools lint
	@# pytest exits 5 when it collected no test: here that means the suite is broken
	$(BIN)/python -m pytest; rc=$$?; [ $$rc -ne 5 ] || { echo "pytest collected no tests" >&2; exit 1; }; exit $$rc

# Mutation testing (slow, not in CI): mutants of the modules in [tool.mutmut] of pyproject.toml,
# each run against the tests that reach it. MODULE narrows it, e.g. MODULE=gatekeeper.breaker.state.
# Kill rates per module: benchmarks/README.md.
mutation: setup
	$(BIN)/mutmut run --max-children 2 $(if $(MODULE),"$(MODULE)*")
	$(BIN)/mutmut results

clean:
	rm -rf artifacts .gatekeeper .pytest_cache .ruff_cache dist mutants
