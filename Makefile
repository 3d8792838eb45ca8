# her-rl developer commands. Every target creates .venv itself (idempotent `make install`).
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

# The third-party env families, the SB3 peers, the W&B and MLflow trackers and Ray (robotics, panda, bench, wandb, mlflow,
# ray extras): CI installs them so their tests run.
.PHONY: install install-extras docs docs-serve run test bench bench-her bench-ppo bench-push bench-env bench-continuous bench-fetch bench-fetch-frontier clean

install: $(STAMP)

# torch is pinned to the CPU wheel that lies on disk; an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[test,launchers,tune,video]"
	touch $(STAMP)

# Ray last, on its own: hydra-ray-launcher pins an older cloudpickle, which the joblib launcher still runs with.
$(VENV)/.extras: $(STAMP)
	$(BIN)/pip install --quiet -e ".[robotics,panda,bench,wandb,mlflow]"
	$(BIN)/pip install --quiet -e ".[ray]"
	touch $@

install-extras: $(VENV)/.extras

run: install
	$(BIN)/her-run algo=her_dqn env=bitflip n=15

test: install
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15 tests

# Side-by-side benchmarks against Stable-Baselines3 (a benchmark-only extra).
$(VENV)/.bench: $(STAMP)
	$(BIN)/pip install --quiet -e ".[bench]"
	touch $@

bench: bench-her bench-ppo bench-push bench-env

# The bit-flip defaults against SB3 at n=20 and 15, then ours alone at the sizes SB3 does not solve in minutes.
bench-her: $(VENV)/.bench
	$(BIN)/python scripts/bench_her.py --n 20 15 --seeds 0 1 2 --jobs 1 --sb3-max-seconds 300
	$(BIN)/python scripts/bench_her.py --n 30 50 64 100 --seeds 0 1 2 --jobs 1 --only ours

# HER-DQN on push and drag (3 seeds, stop at 0.9 greedy success), then plain DQN at the same budgets.
bench-push: $(STAMP)
	mkdir -p bench_results
	$(BIN)/python scripts/bench_push.py --envs push drag --seeds 0 1 2 --strategies future --json bench_results/push_her.json
	$(BIN)/python scripts/bench_push.py --envs push drag --seeds 0 1 2 --strategies none \
		--budget-from bench_results/push_her.json --json bench_results/push_none.json
	$(BIN)/python scripts/bench_push.py --table bench_results/push_her.json bench_results/push_none.json

# Continuous-action HER (ours) against SB3 SAC + HER on FetchReach, then ours on continuous push and drag
# (3 seeds, stop at 0.9) and SB3 on continuous push with a wall cap; then like for like on FetchReach
# (docs/benchmarks/like-for-like.md): against RL-Zoo's SAC + HER, and each learner against its SB3 twin.
# Needs MuJoCo: the robotics extra.
$(VENV)/.robotics: $(VENV)/.bench
	$(BIN)/pip install --quiet -e ".[robotics]"
	touch $@

bench-continuous: $(VENV)/.robotics
	mkdir -p bench_results
	$(BIN)/python scripts/bench_continuous.py --envs fetch_reach --sides ours sb3 --algo her_ddpg --seeds 0 1 2 \
		--budget 9600 --eval-every 800 --jobs 2 --json bench_results/fetch_reach.json
	$(BIN)/python scripts/bench_continuous.py --envs push drag --sides ours --algo her_sac --seeds 0 1 2 \
		--budget 400000 --eval-every 8000 --stop-at-target --json bench_results/push_drag_continuous.json
	$(BIN)/python scripts/bench_continuous.py --envs push --sides sb3 --seeds 0 --budget 400000 --eval-every 8000 \
		--sb3-max-seconds 1200 --json bench_results/push_continuous_sb3.json
	$(BIN)/python scripts/bench_like_for_like.py --envs fetch_reach --pairs zoo --seeds 0 1 2 --budget 10000 \
		--eval-every 1000 --eval-episodes 50 --json bench_results/like_fetch_reach_zoo.json
	$(BIN)/python scripts/bench_like_for_like.py --envs fetch_reach --pairs twins --seeds 0 1 2 --budget 10000 \
		--eval-every 1000 --eval-episodes 50 --json bench_results/like_fetch_reach_twins.json
	$(BIN)/python scripts/bench_like_for_like.py --table bench_results/like_fetch_reach_zoo.json \
		bench_results/like_fetch_reach_twins.json --png bench_results/like_fetch_reach.png

# The 1M-step Fetch runs (hours), with the tuned files, one seed each: FetchPush (stops at 0.9) beside
# FetchPickAndPlace (stops at 0.7) then FetchSlide (stops at 0.5); then HER-DDPG against RL-Zoo's
# TQC + HER on the three (3 seeds, SB3 capped at 4 hours a run).
bench-fetch: $(VENV)/.robotics
	mkdir -p bench_results
	$(BIN)/python scripts/bench_continuous.py --envs fetch_push --sides ours --algo her_ddpg --seeds 0 \
		--budget 1000000 --eval-every 20000 --stop-at-target --json bench_results/fetch_push_1m.json & \
	$(BIN)/python scripts/bench_continuous.py --envs fetch_pick_and_place --sides ours --algo her_ddpg --seeds 0 \
		--budget 1000000 --eval-every 20000 --target 0.7 --stop-at-target \
		--json bench_results/fetch_pick_and_place_1m.json && \
	$(BIN)/python scripts/bench_continuous.py --envs fetch_slide --sides ours --algo her_ddpg --seeds 0 \
		--budget 1000000 --eval-every 20000 --target 0.5 --stop-at-target --json bench_results/fetch_slide_1m.json; \
	wait
	$(BIN)/python scripts/bench_like_for_like.py --envs fetch_push fetch_pick_and_place fetch_slide --pairs zoo \
		--seeds 0 1 2 --budget 1000000 --eval-every 20000 --eval-episodes 50 --sb3-max-seconds 14400 \
		--json bench_results/like_fetch_zoo_1m.json --png bench_results/like_fetch_zoo_1m.png

# The FetchPush preset against its SB3 twin (docs/benchmarks/fetch.md): 3 seeds a side, one run per core
# (about an hour each), rows added to bench_results/fetch_frontier.json as runs end; then the tables and curves.
# PRESET=fetch_pick_and_place_frontier or fetch_slide_frontier: 1M env steps a run (one to two hours here)
PRESET ?= fetch_push_frontier
bench-fetch-frontier: $(VENV)/.robotics $(VENV)/.bench
	mkdir -p bench_results
	for seed in 0 1 2; do \
		$(BIN)/python scripts/bench_fetch_frontier.py --preset $(PRESET) --side ours --seeds $$seed --json bench_results/fetch_frontier.json & \
		$(BIN)/python scripts/bench_fetch_frontier.py --preset $(PRESET) --side sb3 --seeds $$seed --json bench_results/fetch_frontier.json; \
		wait; \
	done
	$(BIN)/python scripts/bench_fetch_frontier.py --preset $(PRESET) --report bench_results/fetch_frontier.json \
		--png bench_results/$(PRESET).png

bench-env: $(STAMP)
	$(BIN)/python scripts/bench_env_speed.py --envs push drag bitflip --num-envs 64 256 --steps 2000

bench-ppo: $(VENV)/.bench
	$(BIN)/python scripts/bench_ppo.py --task cartpole --seeds 0 1 2 3 4

# The docs site (docs/, mkdocs.yml), built offline into site/; --strict turns every warning into an error.
$(VENV)/.docs: $(STAMP)
	$(BIN)/pip install --quiet -e ".[docs]"
	touch $@

docs: $(VENV)/.docs
	$(BIN)/python scripts/config_reference.py --check
	$(BIN)/python scripts/tb_tags.py --check
	$(BIN)/mkdocs build --strict

docs-serve: $(VENV)/.docs
	$(BIN)/mkdocs serve

clean:
	rm -rf $(VENV) outputs multirun build site *.egg-info
