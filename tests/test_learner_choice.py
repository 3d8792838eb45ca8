"""A command that names no learner gets the one its env calls for, and an env of a family its measured
settings whatever its group; what was chosen and set is said in one line, and what cannot be reached or
is read differently (a dense goal reward, a return threshold past the episode cap) is said at start."""

import subprocess
import textwrap

import pytest

import her_rl
from her_rl.config.compose import choose, compose
from her_rl.errors import ConfigError

# A goal env of the user's whose reward is dense: minus the distance to the goal.
DENSE_ENV = textwrap.dedent("""
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces

    class DenseReach(gym.Env):
        def __init__(self):
            point = spaces.Box(-1, 1, (2,), np.float32)
            self.observation_space = spaces.Dict(observation=point, achieved_goal=point, desired_goal=point)
            self.action_space = spaces.Box(-1, 1, (2,), np.float32)

        def compute_reward(self, achieved_goal, desired_goal, info):
            return -np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1)

        def _obs(self):
            return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy()}

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.pos, self.goal = self.np_random.uniform(-1, 1, (2, 2)).astype(np.float32)
            return self._obs(), {"is_success": False}

        def step(self, action):
            self.pos = np.clip(self.pos + 0.1 * np.asarray(action, np.float32), -1, 1)
            near = bool(np.linalg.norm(self.pos - self.goal) < 0.1)
            return self._obs(), float(self.compute_reward(self.pos, self.goal, None)), False, False, {"is_success": near}

    gym.register(id="DenseReach-v0", entry_point=DenseReach, max_episode_steps=20)
""")


def test_the_learner_follows_the_env_when_algo_is_not_given():
    assert choose([]) == choose(["n=8"]) == choose(["algo=her_dqn", "env=bitflip", "n=15"])  # nothing added or said
    assert choose([]).added == () and choose([]).line is None
    cartpole = choose(["env=cartpole"])
    assert cartpole.added == ("algo=ppo",) and "algo=ppo, chosen for env CartPole-v1: not a goal env" in cartpole.line
    box = choose(["env=push", "env.kwargs.actions=continuous"])
    assert box.added == ("algo=her_crossq",) and "a goal env with Box actions (algo= picks another)" in box.line
    assert compose(["env=push", "env.kwargs.actions=continuous"]).algo.name == "her_crossq"
    # a learner or an experiment named on the command line is what runs
    assert choose(["algo=her_sac", "env=push", "env.kwargs.actions=continuous"]).added == ()
    assert choose(["experiment=her_bitflip_figure"]) == choose(["load=somewhere"]) == choose(["resume=true"])
    assert choose(["experiment=her_bitflip_figure"]).added == ()


def test_a_box_goal_env_trains_with_no_algo_and_the_choice_is_said(tmp_path, capsys):
    results = her_rl.train(["env=push", "env.kwargs.actions=continuous", "budget.env_steps=400", "progress=false",
                            "algo.batch_size=32"], out_dir=tmp_path / "run")
    assert results["algo"] == "her_crossq" and results["env_steps"] >= 400
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if line.startswith("her-run: algo=")]
    assert said == ["her-run: algo=her_crossq, chosen for env her_rl/Push-v0: a goal env with Box actions "
                    "(algo= picks another)"]


def test_a_key_only_the_chosen_learner_has_is_taken(tmp_path):
    # her_dqn, the default learner, has no target_entropy: the key waits for the learner the env calls for
    given = ["env=push", "env.kwargs.actions=continuous", "algo.target_entropy=0", "algo.policy_delay=2"]
    assert choose(given).added == ("algo=her_crossq",)
    algo = compose(given).algo
    assert algo.name == "her_crossq" and algo.target_entropy == 0 and algo.policy_delay == 2
    with pytest.raises(ConfigError, match="unknown config key 'algo.nope': algo 'her_crossq' has no such key"):
        her_rl.train(["env=push", "env.kwargs.actions=continuous", "algo.nope=1"], out_dir=tmp_path / "run")


def test_a_sweep_whose_envs_need_different_learners_is_refused(her_run_here, tmp_path):
    done = her_run_here(["-m", "env=cartpole,bitflip"], tmp_path)
    assert done.returncode == 2
    assert "call for different learners" in done.stderr and "give algo=" in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_return_threshold_past_the_episode_cap_is_warned(tmp_path, capsys):
    her_rl.train(["env=cartpole", "+env.max_episode_steps=100", "budget.env_steps=300", "progress=false"],
                 out_dir=tmp_path / "run")
    err = capsys.readouterr().err
    assert "eval.return_threshold 475 is above the 100 steps an episode of CartPole-v1 may last" in err
    her_rl.train(["env=cartpole", "budget.env_steps=300", "progress=false"], out_dir=tmp_path / "plain")
    assert "return_threshold" not in capsys.readouterr().err  # 500 steps reach 475


def test_a_dense_goal_reward_is_said(tmp_path, capsys, monkeypatch):
    (tmp_path / "user_dense.py").write_text(DENSE_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    results = her_rl.train(["env=gym", "env.id=user_dense:DenseReach-v0", "budget.env_steps=200", "progress=false",
                            "algo.batch_size=32"], out_dir=tmp_path / "run")
    out = capsys.readouterr().out
    assert results["algo"] == "her_crossq"
    assert "env user_dense:DenseReach-v0: its reward is dense" in out
    assert "tuned file her_crossq_gym sets algo.episodes_per_cycle=2, algo.updates_per_step=0.4" in out
    assert "budget.env_steps" not in out.split("tuned file")[1].split("(a key")[0]  # the command's own key wins
    # its sparse twin (-1 until near the goal) is not said to be dense
    (tmp_path / "user_sparse.py").write_text(DENSE_ENV.replace("DenseReach", "SparseReach").replace(
        "return -np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1)",
        "return -(np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) >= 0.1).astype(np.float32)"))
    her_rl.train(["env=gym", "env.id=user_sparse:SparseReach-v0", "budget.env_steps=200", "progress=false",
                  "algo.batch_size=32"], out_dir=tmp_path / "sparse")
    assert "dense" not in capsys.readouterr().out


@pytest.fixture
def robotics():
    pytest.importorskip("gymnasium_robotics")


def test_a_fetch_task_gets_the_same_setting_by_its_group_and_by_its_id(robotics):
    by_group, by_id = compose(["env=fetch_push"]), compose(["env=gym", "env.id=FetchPush-v4"])
    assert by_group.algo == by_id.algo and by_group.algo.name == "her_crossq"
    assert by_id.algo.episodes_per_cycle == 2 and by_id.algo.updates_per_step == 0.4
    assert by_group.eval == by_id.eval and by_id.eval.episodes == 50 and by_id.eval.every_env_steps == 10_000
    assert by_group.budget == by_id.budget
    given = compose(["env=gym", "env.id=FetchPush-v4", "eval.episodes=7", "algo.updates_per_step=1.0"])
    assert given.eval.episodes == 7 and given.algo.updates_per_step == 1.0  # a key on the command line wins
    # the preset and a learner named with the group's own tuned file are as they were
    preset = compose(["experiment=fetch_push_frontier"])
    assert preset.algo.episodes_per_cycle == 2 and preset.algo.updates_per_step is None
    assert preset.budget.env_steps == 200_000
    assert compose(["algo=her_ddpg", "env=fetch_push"]).algo == compose(["algo=her_ddpg", "env=fetch_push",
                                                                         "tuned=her_ddpg_fetch_push"]).algo


def test_fetch_pick_and_place_trains_by_its_id_with_no_algo(robotics, her_run, tmp_path):
    done = subprocess.run([her_run, "env=gym", "env.id=FetchPickAndPlace-v4", "budget.env_steps=200",
                           "progress=false", "hydra.run.dir=run"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("her-run: ")]
    assert len(said) == 1 and "algo=her_crossq, chosen for env FetchPickAndPlace-v4" in said[0]
    assert "tuned file her_crossq_pick_and_place sets" in said[0] and "budget.env_steps" not in said[0]
    assert "name: her_crossq" in (tmp_path / "run" / "config.yaml").read_text()


def _gym_file_and_one_key(composed, gym_setting, env_id: str, name: str, key: str, value) -> None:
    """A kind's file is the gym file with one key more: the rest of its setting is the same, and the start
    line names the gym file's keys, then its own."""
    assert {k: v for k, v in composed.algo.items() if k != key} == {k: v for k, v in gym_setting.algo.items()
                                                                   if k != key}
    assert composed.eval == gym_setting.eval and composed.budget == gym_setting.budget
    line = choose(["env=gym", f"env.id={env_id}"]).line
    assert f"tuned file {name} sets algo.episodes_per_cycle=2, algo.updates_per_step=0.4" in line
    assert line.index("algo.updates_per_step") < line.index(f"algo.{key}={value}")


def test_fetch_pick_and_place_gets_its_own_file_by_its_id_and_by_its_group(robotics):
    by_id = compose(["env=gym", "env.id=FetchPickAndPlace-v4"])
    by_group = compose(["env=fetch_pick_and_place", "algo=her_crossq"])
    gym_setting = compose(["env=gym", "env.id=FetchPickAndPlace-v4", "tuned=her_crossq_gym"])
    assert by_id.algo.n_step == 3 == by_group.algo.n_step and gym_setting.algo.n_step == 1
    _gym_file_and_one_key(by_id, gym_setting, "FetchPickAndPlace-v4", "her_crossq_pick_and_place", "n_step", 3)
    assert compose(["env=gym", "env.id=FetchPush-v4"]).algo.n_step == 1  # pushing keeps the gym file
    assert compose(["env=gym", "env.id=FetchPickAndPlace-v4", "algo.n_step=1"]).algo.n_step == 1  # the command wins
    # the other learners keep what they took by the id: the group's own files are not the kind's
    assert compose(["algo=her_sac", "env=gym", "env.id=FetchPickAndPlace-v4"]).algo.tau == 0.005  # her_sac_gym
    assert compose(["algo=her_ddpg", "env=gym", "env.id=FetchPickAndPlace-v4"]).algo.n_step == 1


def test_panda_pick_and_place_gets_the_pick_and_place_file_with_gamma_095_and_an_energy_half_by_its_id(robotics):
    panda = compose(["env=gym", "env.id=PandaPickAndPlace-v3"])
    fetch_setting = compose(["env=gym", "env.id=PandaPickAndPlace-v3", "tuned=her_crossq_pick_and_place"])
    assert panda.algo.gamma == 0.95 and panda.algo.n_step == 3 and fetch_setting.algo.gamma == 0.98
    assert panda.algo.prioritize == "energy" and panda.algo.energy_share == 0.5
    assert fetch_setting.algo.prioritize == "none" and fetch_setting.algo.energy_share == 1.0
    own = ("gamma", "prioritize", "energy_share")
    assert {k: v for k, v in panda.algo.items() if k not in own} == {k: v for k, v in fetch_setting.algo.items()
                                                                     if k not in own}
    assert panda.eval == fetch_setting.eval and panda.budget == fetch_setting.budget
    line = choose(["env=gym", "env.id=PandaPickAndPlace-v3"]).line
    assert ("tuned file her_crossq_panda_pick_and_place sets algo.episodes_per_cycle=2, algo.updates_per_step=0.4"
            in line)
    assert line.index("algo.updates_per_step") < line.index("algo.n_step=3") < line.index("algo.gamma=0.95") \
        < line.index("algo.prioritize=energy, algo.energy_share=0.5")
    for other in ("PandaPush-v3", "PandaStack-v3", "FetchPickAndPlace-v4"):  # the panda kind is this task's alone
        assert compose(["env=gym", f"env.id={other}"]).algo.gamma == 0.98
        assert compose(["env=gym", f"env.id={other}"]).algo.prioritize == "none"
    assert compose(["env=gym", "env.id=PandaPickAndPlace-v3", "algo.gamma=0.98"]).algo.gamma == 0.98  # the command wins
    assert compose(["env=gym", "env.id=PandaPickAndPlace-v3", "algo.energy_share=1"]).algo.energy_share == 1
    assert compose(["algo=her_sac", "env=gym", "env.id=PandaPickAndPlace-v3"]).algo.gamma == 0.98  # her_sac_gym


def test_a_point_maze_gets_its_own_file_and_the_ant_maze_the_gym_one(robotics):
    point, ant = compose(["env=gym", "env.id=PointMaze_Medium-v3"]), compose(["env=gym", "env.id=AntMaze_UMaze-v5"])
    gym_setting = compose(["env=gym", "env.id=PointMaze_Medium-v3", "tuned=her_crossq_gym"])
    assert point.algo.gamma == 0.99 and ant.algo.gamma == 0.98 == gym_setting.algo.gamma
    _gym_file_and_one_key(point, gym_setting, "PointMaze_UMaze-v3", "her_crossq_point_maze", "gamma", 0.99)
    assert "her_crossq_gym" in choose(["env=gym", "env.id=AntMaze_UMaze-v5"]).line
    assert "algo.gamma" not in choose(["env=gym", "env.id=PointMaze_UMaze-v3", "algo.gamma=0.95"]).line
