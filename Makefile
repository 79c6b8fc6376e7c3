# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0
# `rl` (ray[rllib], pins gymnasium 1.2.2) so the learned-scheduler tests run in CI;
# `docs` (mkdocs) so the suite builds the documentation site with --strict;
# `sb3`, `pettingzoo` so the third-party RL tests of the envs run (tests/envs/test_flat.py);
# `make test EXTRAS=dev` tests without them (those tests then skip).
EXTRAS ?= dev,rl,docs,sb3,pettingzoo,tensorboard,mlflow
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick test-slow lint docs install data clean torch-pip-args

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The CPU build of torch is installed first and pinned as `torch==X+cpu`: a bare
# `torch` requirement would pull a multi-GB CUDA build from PyPI, while the `+cpu`
# version exists only on PyTorch's CPU wheel index (TORCH_INDEX) and in local wheel
# folders (TORCH_WHEELS), so it can never resolve to CUDA. The index is probed once
# (5 s); where it is unreachable, the local folder is used if it exists, and if
# neither has the wheel the install stops with a message instead of taking CUDA.
# `rayfl`'s own `torch>=2.2` is then already satisfied by the CPU build.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_WHEELS ?= /opt/wheels
# (probed at most once per make run, and only when a recipe needs it)
TORCH_INDEX_UP = $(eval TORCH_INDEX_UP := $(shell $(PY) -c "import urllib.request as u; \
  u.urlopen('$(TORCH_INDEX)/torch/', timeout=5)" >/dev/null 2>&1 && echo yes))$(TORCH_INDEX_UP)
TORCH_PIP_ARGS = $(if $(TORCH_INDEX_UP),--extra-index-url $(TORCH_INDEX)) \
  $(if $(wildcard $(TORCH_WHEELS)/torch-*),--find-links $(TORCH_WHEELS)) torch==$(TORCH_VERSION)+cpu

$(STAMP): $(BIN)/python pyproject.toml
	@echo "$(BIN)/pip install --quiet" $(TORCH_PIP_ARGS)
	@$(BIN)/pip install --quiet $(TORCH_PIP_ARGS) || { \
	  echo "error: could not install the CPU build torch==$(TORCH_VERSION)+cpu. It comes from" \
	       "PyTorch's CPU wheel index (TORCH_INDEX=$(TORCH_INDEX), $(if $(TORCH_INDEX_UP),reachable,unreachable from here))" \
	       "or a local folder of wheels (TORCH_WHEELS=$(TORCH_WHEELS), $(if $(wildcard $(TORCH_WHEELS)/torch-*),has torch wheels,no torch wheel there))." \
	       "Set TORCH_INDEX to a reachable mirror of that index, or TORCH_WHEELS to a folder" \
	       "holding torch-$(TORCH_VERSION)+cpu-*.whl." >&2; exit 1; }
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

# The pip arguments that install torch (what `install` runs), for checks and debugging.
torch-pip-args:
	@echo $(TORCH_PIP_ARGS)

install: $(STAMP)

# Fashion-MNIST from Debian's package (offline data; needs root, skipped if present).
data:
	@if [ ! -d /usr/share/datasets/fashion-mnist ]; then \
	  (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist) \
	  || echo "note: could not install dataset-fashion-mnist; Fashion-MNIST tests will skip"; \
	fi

demo: install
	$(BIN)/rayfl run examples/quickstart.yaml

# Two pytest-xdist workers (CI has 2 cores), each running whole test files
# (--dist loadfile: a file's module-scoped fixtures and the shared Ray session of
# tests/conftest.py stay within one process). TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: install data
	$(BIN)/python -m pytest -q --durations=25 -n $(TEST_WORKERS) --dist loadfile

# The smoke subset (pytest marker `quick`): run, resume, the env, a policy per
# topology, the CLI's errors and help. No Fashion-MNIST needed. Only the files
# holding `quick` tests are collected (collecting the whole suite imports every
# test module); tests/test_quick_smoke.py checks this list against the markers.
QUICK_TESTS = tests/test_quick_smoke.py tests/test_startup_imports.py \
	tests/test_cli_polish.py tests/test_compare_progress.py tests/test_startup_setup.py
test-quick: install
	$(BIN)/python -m pytest -q -m "quick and not slow" --durations=10 $(QUICK_TESTS)

test-slow: install data
	$(BIN)/python -m pytest -q -m slow

lint: install
	$(BIN)/ruff check .

# The documentation site, built into site/ with warnings as errors (mkdocs.yml;
# scripts/docs_site.py generates the configuration and API references). Nothing is
# fetched from the network. NO_MKDOCS_2_WARNING silences the theme's banner.
docs: install
	@$(BIN)/python -c "import mkdocs" 2>/dev/null || $(BIN)/pip install --quiet -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) runs site .pytest_cache
