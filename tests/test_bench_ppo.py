"""scripts/bench_ppo.py over bench.onpolicy: plain PPO gets RND-PPO's PPO settings, the deep
sea curve, CartPole against a stand-in peer (and SB3 PPO only when it is installed), the probe."""

import argparse
import json

import pytest
from conftest import load_script, unload_script

from bench import onpolicy, peers
from her_rl.config.compose import compose


@pytest.fixture(scope="module")
def bench():
    yield load_script("bench_ppo")
    unload_script("bench_ppo")


@pytest.mark.parametrize("env", ["deep_sea", "mountaincar"])
def test_plain_ppo_gets_exactly_the_ppo_keys_rnd_ppo_runs_with(env):
    rnd = compose(["algo=rnd_ppo", f"env={env}"]).algo  # includes conf/tuned/rnd_ppo_<env>.yaml
    ppo = compose(["algo=ppo", f"env={env}", *onpolicy.ppo_overrides_like_rnd(env)]).algo
    shared = set(ppo) - {"name", "_target_", "gamma"}
    assert shared and all(ppo[k] == rnd[k] for k in shared), {k: (ppo[k], rnd[k]) for k in shared if ppo[k] != rnd[k]}
    assert ppo.gamma == rnd.gamma_ext


def test_deep_sea_curve_runs_every_size_and_budget_and_rewrites_its_report(tmp_path):
    out = tmp_path / "curve.json"
    args = argparse.Namespace(task="deep_sea", size=[4, 5], seeds=[0], algos=["rnd_ppo", "ppo"], budget=3000,
                              ppo_budget=2000, eval_every=2, eval_episodes=1, set=["algo.num_envs=4"], out=out)
    report = onpolicy.bench_exploration(args, tmp_path)
    rows = report["rows"]
    assert [(r["size"], r["budget"]) for r in rows["rnd_ppo"]] == [(4, 3000), (5, 3000)]
    assert [(r["size"], r["budget"]) for r in rows["ppo"]] == [(4, 2000), (5, 2000)]
    assert all(r["env_steps"] <= r["budget"] + 4 * 16 for rs in rows.values() for r in rs)
    assert set(report["summary"]["ppo"]) == {"size 4", "size 5"}
    written = json.loads(out.read_text())
    assert written["rows"] == json.loads(json.dumps(rows))  # the last rewrite holds every run
    assert written["summary"] == json.loads(json.dumps(report["summary"])) and written["args"]["budget"] == 3000
    table = onpolicy.size_table(rows).splitlines()
    assert len(table) == 4 and table[2].startswith("| 4 |") and table[3].startswith("| 5 |")
    assert table[1] == "|---:|---|---|---|---|"


def test_cartpole_against_a_stand_in_peer_writes_rows_summary_and_args(bench, tmp_path, monkeypatch, capsys):
    asked = []

    def stand_in(seed, protocol, episodes):
        asked.append((seed, protocol, episodes))
        return peers.PeerRun([(1024, 1.0, 120.0), (2048, 2.0, 480.0)], 2056, 2.4567)

    monkeypatch.setattr(peers, "missing", lambda: None)
    monkeypatch.setattr(peers, "ppo_cartpole", stand_in)
    out = tmp_path / "cartpole.json"
    assert bench.main(["--seeds", "0", "--budget", "1024", "--eval-every", "2", "--eval-episodes", "2",
                       "--out", str(out)]) == 0
    assert asked == [(0, peers.Protocol(2, 100_000, 475, per_rollout=True), 2)]
    data = json.loads(out.read_text())
    assert data["rows"]["sb3"] == [{"seed": 0, "solved": True, "env_steps": 2048, "wall_s": 2.457, "final_eval": 480.0}]
    (ours,) = data["rows"]["ours"]
    assert set(ours) == {"seed", "solved", "env_steps", "wall_s", "final_eval"} and ours["final_eval"] is not None
    assert data["summary"]["sb3"] == {"solved": "1/1", "median_env_steps": 2048, "median_wall_s": 2.457}
    assert data["args"]["budget"] == 1024 and '"sb3"' in capsys.readouterr().out


def test_the_sb3_ppo_peer_is_evaluated_after_every_few_rollouts():
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 (the bench extra) is not installed")
    run = peers.ppo_cartpole(0, peers.Protocol(every=2, steps=1024, per_rollout=True), episodes=2)
    assert [step for step, _, _ in run.curve] == [512, 1024] and run.env_steps == 1024
    assert all(1.0 <= value <= 500.0 for _, _, value in run.curve)


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
