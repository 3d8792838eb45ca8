"""scripts/bench_ppo.py: the PPO side of the exploration benchmark gets RND-PPO's PPO settings."""

import pytest
from conftest import load_script, unload_script

from her_rl.runner import compose


@pytest.fixture(scope="module")
def bench():
    yield load_script("bench_ppo")
    unload_script("bench_ppo")


@pytest.mark.parametrize("env", ["deep_sea", "mountaincar"])
def test_plain_ppo_gets_exactly_the_ppo_keys_rnd_ppo_runs_with(bench, env):
    rnd = compose(["algo=rnd_ppo", f"env={env}"]).algo  # includes conf/tuned/rnd_ppo_<env>.yaml
    ppo = compose(["algo=ppo", f"env={env}", *bench.ppo_overrides_like_rnd(env)]).algo
    shared = set(ppo) - {"name", "_target_", "gamma"}
    assert shared and all(ppo[k] == rnd[k] for k in shared), {k: (ppo[k], rnd[k]) for k in shared if ppo[k] != rnd[k]}
    assert ppo.gamma == rnd.gamma_ext
