"""The non-finite guard ends every algorithm's run in the iteration a huge learning rate breaks it:
exit 3 and one line naming what went non-finite (a loss, Adam's state, a policy's distribution
parameter, an overflowing optimiser step)."""

import re
import subprocess

import pytest

CONT = ["env=push", "env.kwargs.actions=continuous"]
CASES = {
    "her_dqn": (["algo=her_dqn", "env=bitflip", "algo.lr=1e10"], "optimiser state optimizer.exp_avg_sq"),
    "her_ddpg": (["algo=her_ddpg", *CONT, "algo.actor_lr=1e10", "algo.critic_lr=1e10"], "losses/qf_loss = nan"),
    "her_sac": (["algo=her_sac", *CONT, "algo.alpha_lr=1e10"], "parameter loc of the policy's Normal distribution"),
    "her_td3": (["algo=her_td3", *CONT, "algo.actor_lr=1e10", "algo.critic_lr=1e10"], "losses/qf_loss = nan"),
    "ppo": (["algo=ppo", "env=pendulum", "algo.lr=1e10"], "parameter loc of the policy's Normal distribution"),
    "rnd_ppo": (["algo=rnd_ppo", "env=pendulum", "algo.lr=1e10"], "parameter loc of the policy's Normal distribution"),
    "reinforce": (["algo=reinforce", "env=pendulum", "algo.lr=1e10"], "losses/policy_loss = nan"),
    "reinforce-overflow": (["algo=reinforce", "env=cartpole", "algo.lr=1e38"], "optimiser step (its size overflows"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_huge_learning_rate_stops_the_run_with_exit_3_and_one_line(her_run, tmp_path, case):
    overrides, what = CASES[case]
    proc = subprocess.run([her_run, *overrides, "budget.env_steps=20000", "progress=false", "checkpoint.every_s=0",
                           f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert len(lines) == 1 and lines[0].startswith("her-run: error: non-finite "), lines
    assert what in lines[0]
    iteration = int(re.search(r"in iteration (\d+)", lines[0]).group(1))
    assert iteration <= 2  # each case breaks in its first or second iteration; the guard sees it there
    assert not (tmp_path / "run" / "results.json").exists()
