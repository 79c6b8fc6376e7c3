# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0
# `rl` (ray[rllib], pins gymnasium 1.2.2) so the learned-scheduler tests run in CI;
# `make test EXTRAS=dev` tests without it (those tests then skip).
EXTRAS ?= dev,rl
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint install data clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The CPU build of torch is installed first and pinned: a bare `torch` requirement
# would pull a multi-GB CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

# Fashion-MNIST from Debian's package (offline data; needs root, skipped if present).
data:
	@if [ ! -d /usr/share/datasets/fashion-mnist ]; then \
	  (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist) \
	  || echo "note: could not install dataset-fashion-mnist; Fashion-MNIST tests will skip"; \
	fi

demo: install
	$(BIN)/rayfl run examples/quickstart.yaml

test: install data
	$(BIN)/python -m pytest -q

test-slow: install data
	$(BIN)/python -m pytest -q -m slow

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) runs .pytest_cache
