"""The non-finite guard ends every algorithm's run in the iteration a huge learning rate breaks it:
exit 3 and one line naming what went non-finite (a loss, Adam's state, a policy's distribution
parameter, an overflowing optimiser step)."""

import re
import subprocess

import pytest

from her_rl.errors import NonFiniteError
from her_rl.runner import main

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
    proc = subprocess.run([her_run, *overrides, "budget.env_steps=20000", "progress=false",
                           f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 3 and len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith("her-run: error: non-finite ") and what in lines[0]
