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


def test_deep_sea_curve_runs_every_size_and_budget_and_rewrites_its_report(bench, tmp_path):
    import argparse
    import json

    out = tmp_path / "curve.json"
    args = argparse.Namespace(task="deep_sea", size=[4, 5], seeds=[0], algos=["rnd_ppo", "ppo"], budget=3000,
                              ppo_budget=2000, eval_every=2, eval_episodes=1, set=["algo.num_envs=4"], out=out)
    report = bench.bench_exploration(args, tmp_path)
    rows = report["rows"]
    assert [(r["size"], r["budget"]) for r in rows["rnd_ppo"]] == [(4, 3000), (5, 3000)]
    assert [(r["size"], r["budget"]) for r in rows["ppo"]] == [(4, 2000), (5, 2000)]
    assert all(r["env_steps"] <= r["budget"] + 4 * 16 for rs in rows.values() for r in rs)
    assert set(report["summary"]["ppo"]) == {"size 4", "size 5"}
    assert json.loads(out.read_text())["rows"] == json.loads(json.dumps(rows))  # the last rewrite holds every run
    table = bench.size_table(rows).splitlines()
    assert len(table) == 4 and table[2].startswith("| 4 |") and table[3].startswith("| 5 |")


def test_deep_sea_probe_follows_the_frontier_and_stops_when_greedy_goes_all_right(capsys):
    probe = load_script("deep_sea_probe")
    try:
        result = probe.main(["--size", "6", "--seed", "0", "--budget", "40000", "--every", "5"])
    finally:
        unload_script("deep_sea_probe")
    out = capsys.readouterr().out
    assert "frontier" in out and "P(reach 6:" in out
    assert result["frontier"] == 5  # a size-6 run reaches the last diagonal cell
    assert result["found"] is not None and result["solved_at"] is not None
    assert result["found"] <= result["solved_at"] <= 40000
