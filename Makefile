# Modelwright: `make run` starts the studio, `make test` passes the suite. Both set up first.
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# Two pytest processes (pytest-xdist), whole files each: most tests wait on a worker process,
# so two keep both cores of the 2-core reference machine busy (35 min, ~2x a single process).
TEST_JOBS ?= 2

.PHONY: setup lock run test test-fast bench stress lint clean envs-venv envs-lock envs-eval fast

setup: $(STAMP)

# The venv re-installs when the lock (or what else setup reads) is newer than its stamp.
$(STAMP): requirements.lock pyproject.toml scripts/setup.sh scripts/base-model.txt scripts/check_lock.py
	@bash scripts/setup.sh

# Regenerates requirements.lock from pyproject.toml (needs PyPI): keeps every pin still allowed;
# UPGRADE="pkg ..." moves those packages, UPGRADE=all everything. Then `make setup`. docs/INSTALL.md
lock:
	@UPGRADE="$(UPGRADE)" bash scripts/lock.sh

run: $(STAMP)
	@bash scripts/run.sh

# The `fast` extra (llama.cpp for `--variant fast`), built from source for this CPU (~25 min).
# Optional: nothing else needs it. docs/MODELS.md, "Fast variant: llama.cpp"
fast: $(STAMP)
	@bash scripts/fast_extra.sh

test: $(STAMP)
	@$(BIN)/lint-imports --no-cache pyproject.toml
	@$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)

# The edit-test loop: the tests marked `fast` (tests/conftest.py: no worker, Qt, X server, Ray or
# model) -- parsers, rewards on fixture scenes, the store, configs, CLI errors. `make test` runs
# them too, with the real-kernel ones.
test-fast: $(STAMP)
	@$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile -m fast $(PYTEST_ARGS)

bench: $(STAMP)
	@for f in benchmarks/*.py; do \
	  case $$f in *_gpu.py) a=--dry-run;; *) a=;; esac; \
	  echo "== $$f $$a"; $(BIN)/python $$f $$a || exit 1; done

stress: $(STAMP)
	@$(BIN)/modelwright tools stress --calls 10000

lint: $(STAMP)
	@$(BIN)/ruff check studio agents tools training tests benchmarks examples environments
	@$(BIN)/lint-imports --no-cache pyproject.toml

# verifiers' own venv for the verifiers environment (environments/modelwright, docs/ENVIRONMENTS.md):
# verifiers 0.4.0 cannot share .venv (it pins openai<3, mcp==2.0.0). Needs PyPI.
VF_VENV  := .venv-vf
VF_DIR   := environments/modelwright
VF_STAMP := $(VF_VENV)/.installed

envs-venv: $(VF_STAMP)

$(VF_STAMP): $(VF_DIR)/requirements.lock $(VF_DIR)/pyproject.toml $(wildcard $(VF_DIR)/modelwright_env/*.py) scripts/envs_venv.sh
	@VF_VENV=$(VF_VENV) bash scripts/envs_venv.sh

# Re-pins $(VF_DIR)/requirements.lock from $(VF_DIR)/requirements.in (uv, as `make lock`).
envs-lock: $(VF_STAMP)
	@$(VF_VENV)/bin/uv pip compile $(VF_DIR)/requirements.in --python-version 3.13 \
	  --python-platform x86_64-manylinux_2_34 --generate-hashes --no-progress --quiet \
	  --custom-compile-command "make envs-lock" -o $(VF_DIR)/requirements.lock

# verifiers' vf-eval runs the environment against `transformers serve` on the packaged base, with
# Modelwright's OpenEnv server beside it; both are stopped after. TASKS="id ..." picks the tasks.
envs-eval: $(STAMP) $(VF_STAMP)
	@VF_VENV=$(VF_VENV) bash scripts/envs_eval.sh

clean:
	rm -rf $(VENV) $(VF_VENV) .pytest_cache .ruff_cache .hypothesis
