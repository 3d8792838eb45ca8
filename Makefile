# her-rl developer commands. Every target creates .venv itself (idempotent `make install`).
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: install run test bench bench-her bench-ppo bench-push bench-env clean

install: $(STAMP)

# torch is pinned to the CPU wheel that lies on disk; an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[test,launchers,tune]"
	touch $(STAMP)

run: install
	$(BIN)/her-run algo=her_dqn env=bitflip n=15

test: install
	$(BIN)/python -m pytest -q -n 2 tests

# Side-by-side benchmarks against Stable-Baselines3 (a benchmark-only extra).
$(VENV)/.bench: $(STAMP)
	$(BIN)/pip install --quiet -e ".[bench]"
	touch $@

bench: bench-her bench-ppo bench-push bench-env

bench-her: $(VENV)/.bench
	$(BIN)/python scripts/bench_her.py --n 15 20 30 50 --seeds 0 1 2 --jobs 2

# HER-DQN on push and drag (3 seeds, stop at 0.9 greedy success), then plain DQN at the same budgets.
bench-push: $(STAMP)
	mkdir -p bench_results
	$(BIN)/python scripts/bench_push.py --envs push drag --seeds 0 1 2 --strategies future --json bench_results/push_her.json
	$(BIN)/python scripts/bench_push.py --envs push drag --seeds 0 1 2 --strategies none \
		--budget-from bench_results/push_her.json --json bench_results/push_none.json
	$(BIN)/python scripts/bench_push.py --table bench_results/push_her.json bench_results/push_none.json

bench-env: $(STAMP)
	$(BIN)/python scripts/bench_env_speed.py --envs push drag bitflip --num-envs 64 256 --steps 2000

bench-ppo: $(VENV)/.bench
	$(BIN)/python scripts/bench_ppo.py --task cartpole --seeds 0 1 2 3 4

clean:
	rm -rf $(VENV) outputs multirun build *.egg-info
