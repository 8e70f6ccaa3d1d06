# Set-up and everyday commands. `make demo` runs the main job; `make test` runs every test.
# Both install what they need on a fresh Debian machine (CI runs as root).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch lies on disk on our machines; a loose range would pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0
APT_PACKAGES := fio iproute2 docker-registry chromium prometheus

.PHONY: demo test check deps venv lint bench clean

$(BIN)/fabricguard: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_PIN)"
	$(BIN)/pip install -q -e '.[dev,probe,controller]' "$(TORCH_PIN)"
	touch $@

venv: $(BIN)/fabricguard

deps:
	@if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi; \
	else echo "not root or no apt-get: tests that need $(APT_PACKAGES) will say so and skip"; fi

demo: venv
	$(BIN)/fabricguard validate

test: deps venv
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src
	# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): every CLI test starts
	# `python -m fabricguard`, which otherwise compiles the package again each time, and every xdist worker would
	# rewrite every test module's asserts again. One collection first fills that cache for the four workers.
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q src tests
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q --collect-only -p no:cacheprovider >/dev/null
	# Four workers on two cores: many tests wait on subprocesses, servers and deadlines rather than compute;
	# worksteal keeps the long tests (canary interleavings, netns ranks) from leaving workers idle at the end.
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -n 4 --dist worksteal

lint: venv
	$(BIN)/ruff check src tests bench

# The fast loop (under a minute; `make test` stays the full suite): lint, strict types, the floors (when the shared
# layer tool sits beside the checkout, as in CI), and the unit tests of the vocabulary, fabrics and kinds, without
# the slow, external, root and GPU ones.
CHECK_TESTS ?= tests/foundation tests/fabrics tests/test_quantity.py tests/test_workload_identity.py
check: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src
	@if [ -f ../shared/tools/layers.py ]; then $(PY) ../shared/tools/layers.py src; else echo "layers.py not found beside the checkout: floors not checked"; fi
	$(BIN)/pytest -q -n 4 -p no:cacheprovider -m "not slow and not external and not root and not gpu" $(CHECK_TESTS)

clean:
	rm -rf $(VENV) build *.egg-info
