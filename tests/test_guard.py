"""The non-finite guard (her_rl/run/guard.py): a NaN/inf in a loss or in the networks stops the run in
the iteration it appears, keeping the last good checkpoint, or with guard.nonfinite=skip restores
the last good networks and goes on, up to guard.max_skips in a row."""

import re

import forked
import pytest
import torch

from her_rl.folder import checkpoint
from her_rl.errors import NonFiniteError
from her_rl.run.runner import main

FAST = ["n=4", "progress=false", "eval.every_iterations=1000", "eval.stop_when_solved=false", "eval.episodes=5"]


def train(out, *extra, budget=300):
    return main([*FAST, f"budget.env_steps={budget}", *extra], out_dir=out)


def _poison_at(monkeypatch, iteration, how):
    from her_rl.algos.her_dqn import HerDQN

    original, calls = HerDQN.train_iteration, []

    def poisoned(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        calls.append(1)
        if len(calls) in iteration:
            if how == "loss":
                result.metrics["losses/td_loss"] = float("nan")
            else:
                with torch.no_grad():
                    next(self.q.parameters()).fill_(float("inf"))  # its first layer's weights
        return result
    monkeypatch.setattr(HerDQN, "train_iteration", poisoned)


@pytest.mark.parametrize("how, what", [("loss", "losses/td_loss = nan"), ("weights", r"parameter q\.\S+weight")])
def test_nonfinite_stops_in_the_iteration_it_appears_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch,
                                                                                         how, what):
    _poison_at(monkeypatch, {3}, how)
    out = tmp_path / "run"
    with pytest.raises(NonFiniteError, match=rf"non-finite {what} in iteration 3 .*last good checkpoint"):
        train(out, "checkpoint.every_s=0", budget=5000)
    saved = checkpoint.load(out / "checkpoint.pt")
    assert saved["runner"]["iteration"] == 2  # the bad state was not saved
    assert all(torch.isfinite(t).all() for t in saved["agent"]["q"].values())
    assert not (out / "results.json").exists()


def test_nonfinite_from_a_huge_learning_rate(tmp_path):
    with pytest.raises(NonFiniteError, match="in iteration 1 .*no checkpoint had been written yet"):
        train(tmp_path / "run", "algo.lr=1e30", budget=5000)


def test_guard_skip_restores_the_last_good_networks(tmp_path, monkeypatch, capsys):
    _poison_at(monkeypatch, {3}, "weights")
    results = train(tmp_path / "run", "guard.nonfinite=skip", budget=600)
    assert "update skipped" in capsys.readouterr().err
    saved = checkpoint.load(tmp_path / "run" / "checkpoint.pt")
    assert all(torch.isfinite(t).all() for t in saved["agent"]["q"].values())
    assert results["env_steps"] >= 600


def test_guard_skip_gives_up_after_max_skips(tmp_path):
    with pytest.raises(NonFiniteError, match="2 iterations in a row"):
        train(tmp_path / "run", "algo.lr=1e30", "guard.nonfinite=skip", "guard.max_skips=2", budget=5000)


# A huge learning rate breaks every algorithm within its first iterations; the guard names what went
# non-finite: a loss, Adam's state, a policy's distribution parameter, an overflowing optimiser step.
CONT = ["env=push", "env.kwargs.actions=continuous"]
CASES = {
    "her_dqn": (["algo=her_dqn", "env=bitflip", "algo.lr=1e10"], "optimiser state optimizer.exp_avg_sq"),
    "her_ddpg": (["algo=her_ddpg", *CONT, "algo.actor_lr=1e10", "algo.critic_lr=1e10"], "losses/qf_loss = nan"),
    "her_sac": (["algo=her_sac", *CONT, "algo.alpha_lr=1e10"], "parameter loc of the policy's Normal distribution"),
    "her_td3": (["algo=her_td3", *CONT, "algo.actor_lr=1e10", "algo.critic_lr=1e10"], "losses/qf_loss = nan"),
    "her_redq": (["algo=her_redq", *CONT, "algo.ensemble=3", "algo.alpha_lr=1e10"], "parameter loc of the policy's Normal distribution"),
    "ppo": (["algo=ppo", "env=pendulum", "algo.lr=1e10"], "parameter loc of the policy's Normal distribution"),
    "rnd_ppo": (["algo=rnd_ppo", "env=pendulum", "algo.lr=1e10"], "parameter loc of the policy's Normal distribution"),
    "reinforce": (["algo=reinforce", "env=pendulum", "algo.lr=1e10"], "losses/policy_loss = nan"),
    "reinforce-overflow": (["algo=reinforce", "env=cartpole", "algo.lr=1e38"], "optimiser step (its size overflows"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_huge_learning_rate_stops_the_run_in_its_first_iterations_naming_what_went_non_finite(tmp_path, case):
    overrides, what = CASES[case]
    with pytest.raises(NonFiniteError) as err:
        main([*overrides, "budget.env_steps=20000", "progress=false", "checkpoint.every_s=0"], out_dir=tmp_path / "run")
    text = str(err.value)
    assert text.startswith("non-finite ") and what in text and "\n" not in text
    assert int(re.search(r"in iteration (\d+)", text).group(1)) <= 2  # each case breaks in its first or second
    assert not (tmp_path / "run" / "results.json").exists()


def test_her_run_exits_3_with_one_line(her_run, tmp_path):
    overrides, what = CASES["her_sac"]
    proc = forked.run([her_run, *overrides, "budget.env_steps=20000", "progress=false",
                       f"hydra.run.dir={tmp_path / 'run'}"], text=True, timeout=300)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 3 and len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith("her-run: error: non-finite ") and what in lines[0]
