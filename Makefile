# The two README commands: `make demo` (the whole pipeline on the demo model, on CPU)
# and `make test` (lint, format check, the whole test suite). Both are idempotent.
PYTHON ?= python3
VENV ?= .venv
# The torch to put in a fresh venv. The default is the CPU build this project is
# developed on; the project itself only declares a floor (torch>=2.1) so that a
# ROCm or CUDA image keeps its own torch.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup demo test lint tools dist image clean mutation audit lock fuzz

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
	@# bandit: every finding is fixed or justified inline ("reason  # nosec BXXX"); docs/security.md.
	@# In stages/, assert is how a check states its expectation (the runner records AssertionError
	@# as a failed check), so B101 is skipped there and only there.
	$(BIN)/bandit -q -r gatekeeper
	$(BIN)/bandit -q -r stages -s B101

# The locked dependency set (requirements.lock) checked against the PyPA advisory database.
# Needs network (not part of make test or CI): run it before a release and when the lock changes.
audit: setup
	$(BIN)/pip-audit --requirement requirements.lock --no-deps --disable-pip --progress-spinner off

# Refresh requirements.lock from the dev venv (what make setup installs, with the CPU torch).
lock: setup
	$(BIN)/python -m pip freeze --exclude-editable --all | grep -v '^\(pip\|setuptools\|wheel\)==' > requirements.lock

# WORKERS pytest-xdist processes, each taking whole test files (module fixtures are built once); WORKERS=0 runs
# serially. CONTRIBUTING.md has the measurement behind the default.
WORKERS ?= 2
test: setup tools lint
	@# pytest exits 5 when it collected no test: here that means the suite is broken
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile; rc=$$?; [ $$rc -ne 5 ] || { echo "pytest collected no tests" >&2; exit 1; }; exit $$rc

# The hostile-input matrix's large profile (not in CI; tens of minutes): hypothesis draws EXAMPLES payloads per
# text and number case, and the size classes are bigger (docs/security.md, "The hostile-input matrix").
EXAMPLES ?= 25
SPARSE_MIB ?= 5120
LINE_MIB ?= 256
DEPTH ?= 200000
fuzz: setup
	GATEKEEPER_FUZZ=1 GATEKEEPER_FUZZ_EXAMPLES=$(EXAMPLES) GATEKEEPER_MATRIX_SPARSE_MIB=$(SPARSE_MIB) \
	  GATEKEEPER_MATRIX_LINE_MIB=$(LINE_MIB) GATEKEEPER_MATRIX_DEPTH=$(DEPTH) GATEKEEPER_MATRIX_ALARM_S=900 \
	  $(BIN)/python -m pytest tests/security/test_matrix.py --timeout 3600

# Mutation testing (slow, not in CI): mutants of the modules in [tool.mutmut] of pyproject.toml,
# each run against the tests that reach it. MODULE narrows it, e.g. MODULE=gatekeeper.breaker.state.
# Kill rates per module: benchmarks/README.md.
mutation: setup
	$(BIN)/mutmut run --max-children 2 $(if $(MODULE),"$(MODULE)*")
	$(BIN)/mutmut results

clean:
	rm -rf artifacts .gatekeeper .pytest_cache .ruff_cache dist mutants
