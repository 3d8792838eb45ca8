"""bench/frontier.py: the Fetch frontier preset against its SB3 twin (rows, tables, curves)."""

import importlib.util
import json

import pytest

from bench import frontier, zoo

PRESET = "fetch_push_frontier"


def _row(side, seed, successes, every=10_000):
    return {"side": side, "algo": "her_crossq" if side == "ours" else "sac", "env": "FetchPush-v4", "seed": seed,
            "preset": PRESET, "eval_episodes": 50,
            "evals": [[every * (i + 1), s, 100.0 * (i + 1)] for i, s in enumerate(successes)]}

def _refused(argv, capsys):
    """bench_fetch_frontier's main with ``argv``: it must stop with exit 2; its last stderr line."""
    from conftest import load_script, unload_script

    script = load_script("bench_fetch_frontier")
    try:
        with pytest.raises(SystemExit) as stop:
            script.main(argv)
    finally:
        unload_script("bench_fetch_frontier")
    assert stop.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]



def test_the_twin_is_sb3_sac_with_the_presets_net_batch_gamma_rate_and_hindsight():
    from omegaconf import OmegaConf

    ours = OmegaConf.to_container(frontier.preset_config(PRESET).algo, resolve=True)
    s = frontier.twin(PRESET)
    assert ours["name"] == "her_crossq" and s["algo"] == "sac"
    assert (s["net_arch"], s["batch_size"], s["gamma"], s["learning_rate"]) == (
        ours["hidden"], ours["batch_size"], ours["gamma"], ours["critic_lr"])
    assert (s["n_sampled_goal"], s["strategy"], s["updates_per_env_step"]) == (ours["k"], ours["strategy"], 0.4)
    assert s["target_update_interval"] == s["gradient_steps"] == 40
    assert zoo.TWINS["her_crossq"] == "sac"


@pytest.mark.parametrize("preset", ["fetch_pick_and_place_frontier", "fetch_slide_frontier"])
def test_a_3_step_presets_twin_is_the_nearest_with_1_step_returns_and_says_so(preset):
    from omegaconf import OmegaConf

    ours = OmegaConf.to_container(frontier.preset_config(preset).algo, resolve=True)
    s = frontier.twin(preset)
    assert (ours["name"], ours["n_step"], s["algo"]) == ("her_ddpg", 3, "ddpg")
    assert (s["net_arch"], s["batch_size"], s["gamma"], s["train_freq_episodes"]) == (
        ours["hidden"], ours["batch_size"], ours["gamma"], ours["episodes_per_cycle"])
    one_step = "n_step: ours 3, the twin 1 (SB3's HerReplayBuffer has no n-step returns)"
    bf16 = ["precision: ours bfloat16 matrix products, the twin float32"] if ours["precision"] == "bfloat16" else []
    assert s["differs"] == [one_step, *bf16]
    held = frontier.preset_config(preset).env.get("start_in_gripper")
    assert s.get("start_in_gripper") == (held or None)  # the twin's training env holds the same share
    assert "differs" not in frontier.twin(PRESET)  # FetchPush's twin is exact
    with pytest.raises(ValueError, match="no n_step"):
        zoo.twin_settings(ours, frontier.HORIZON)  # without one_step: refused, as before


def test_rows_are_added_under_a_lock_and_keep_what_was_there(tmp_path):
    path = tmp_path / "rows.json"
    frontier.add_row(path, _row("ours", 0, [0.1]))
    frontier.add_row(path, _row("sb3", 0, [0.0]))
    rows = json.loads(path.read_text())["rows"]
    assert [(r["side"], r["seed"]) for r in rows] == [("ours", 0), ("sb3", 0)]


def test_tables_give_median_iqm_and_steps_to_each_level_per_side():
    rows = [_row("ours", s, v) for s, v in enumerate([[0.2, 0.6, 0.95], [0.1, 0.5, 0.9], [0.0, 0.3, 0.7]])]
    rows += [_row("sb3", s, [0.0, 0.1, 0.2]) for s in range(3)]
    rows.append({**_row("ours", 9, [1.0, 1.0, 1.0]), "preset": None})  # another setting: left out
    steps = frontier.step_table(rows, PRESET)
    assert "0.50 (n=3)" in steps and "0.10 (n=3)" in steps  # the medians at 20,000
    levels = frontier.level_table(rows, PRESET)
    assert frontier.to_level(rows[0], 0.9) == 30_000 and frontier.to_level(rows[2], 0.9) is None
    median_line = next(line for line in levels.splitlines() if "her_crossq median" in line)
    assert "20,000" in median_line and "30,000" in median_line  # to 0.5: 20k, 20k, 30k; to 0.9: 30k, 30k, never
    assert "n=3" in median_line


def test_curves_are_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row("ours", s, [0.1 * s, 0.5, 0.9]) for s in range(3)] + [_row("sb3", 0, [0.0, 0.0, 0.1])]
    frontier.plot(rows, PRESET, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_a_twin_with_a_difference_is_named_so_in_the_tables():
    exact = _row("sb3", 0, [0.0])
    nearest = {**exact, "algo": "ddpg", "settings": {"differs": ["n_step: ours 3, the twin 1"]}}
    assert frontier.side_name([exact]) == "SB3 SAC + HER (twin)"
    assert frontier.side_name([nearest]) == "SB3 DDPG + HER (1-step twin)"


def test_the_step_table_can_keep_every_nth_evaluation_and_the_last():
    rows = [_row("ours", 0, [0.1, 0.2, 0.3, 0.4, 0.5])]  # at 10,000 ... 50,000
    kept = [line.split("|")[1].strip() for line in frontier.step_table(rows, PRESET, every=20_000).splitlines()[2:]]
    assert kept == ["20,000", "40,000", "50,000"]
    assert len(frontier.step_table(rows, PRESET).splitlines()) == 2 + 5


def test_series_of_fewer_seeds_can_be_left_out_of_the_step_table_but_not_the_run_table():
    rows = [_row("ours", s, [0.5]) for s in range(3)] + [{**_row("ours", 0, [0.9]), "set": ["algo.k=2"]}]
    header = frontier.step_table(rows, PRESET, min_seeds=2).splitlines()[0]
    assert "her_crossq median" in header and "algo.k=2" not in header
    assert "algo.k=2" in frontier.step_table(rows, PRESET).splitlines()[0]
    assert "her_crossq algo.k=2 | 0" in frontier.level_table(rows, PRESET)  # every run keeps its row
    assert list(frontier.frontier_rows(rows, PRESET, min_seeds=4)) == []
    rows.insert(0, _row("sb3", 0, [0.0]))  # the preset's own series come first, ours before the twin
    assert list(frontier.frontier_rows(rows, PRESET)) == ["ours", "sb3", "ours algo.k=2"]


@pytest.mark.parametrize("flag, says", [("--every", "--every: a number of env steps, at least 1, got 0"),
                                        ("--min-seeds", "--min-seeds: a number of seeds, at least 1, got 0")])
def test_report_every_or_min_seeds_below_one_is_one_line_and_exit_2(tmp_path, capsys, flag, says):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps({"rows": [_row("ours", 0, [0.1])]}))
    assert _refused(["--report", str(path), flag, "0"], capsys).endswith(says)


class _StillOnEvenSeeds:
    """A 3-step env that succeeds when its reset seed is even and every action was zero."""

    def __new__(cls):
        import gymnasium as gym
        import numpy as np

        class Env(gym.Env):
            observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
            action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

            def reset(self, seed=None, options=None):
                self.even, self.moved, self.t = seed % 2 == 0, False, 0
                return np.zeros(1, np.float32), {}

            def step(self, action):
                self.moved |= bool(np.any(action != 0))
                self.t += 1
                return np.zeros(1, np.float32), 0.0, False, self.t == 3, {"is_success": self.even and not self.moved}

        return Env()


def test_the_still_arms_success_counts_episodes_that_succeed_without_moving():
    import gymnasium as gym

    gym.register("FrontierStillTest-v0", entry_point=_StillOnEvenSeeds)
    try:
        assert frontier.still_success("FrontierStillTest-v0", episodes=10, seed=0) == 0.5
        assert frontier.still_success("FrontierStillTest-v0", episodes=3, seed=1) == pytest.approx(1 / 3)
    finally:
        gym.registry.pop("FrontierStillTest-v0")


def test_the_curves_draw_the_still_arms_line(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    drawn, real = [], plt.Axes.axhline
    monkeypatch.setattr(plt.Axes, "axhline", lambda ax, y, **kw: drawn.append((y, kw.get("label"))) or real(ax, y, **kw))
    frontier.plot([_row("ours", 0, [0.1, 0.5])], PRESET, tmp_path / "c.png", still=0.064)
    assert drawn == [(0.064, "arm kept still (0.06)")]


class _GoalsUpOnOddSeeds:
    """A 2-step goal env whose goal is 0.2 over the object on odd reset seeds; only table goals succeed."""

    def __new__(cls):
        import gymnasium as gym
        import numpy as np

        box = gym.spaces.Box(-1, 1, (3,), np.float32)

        class Env(gym.Env):
            observation_space = gym.spaces.Dict(observation=box, achieved_goal=box, desired_goal=box)
            action_space = gym.spaces.Box(-1, 1, (4,), np.float32)

            def _obs(self):
                goal = np.array([0.1, 0.1, 0.42 + (0.2 if self.up else 0.0)], np.float32)
                return {"observation": np.zeros(3, np.float32),
                        "achieved_goal": np.array([0.0, 0.0, 0.42], np.float32), "desired_goal": goal}

            def reset(self, seed=None, options=None):
                self.up, self.t = seed % 2 == 1, 0
                return self._obs(), {}

            def step(self, action):
                self.t += 1
                return self._obs(), 0.0, False, self.t == 2, {"is_success": not self.up}

        return Env()


def test_success_is_split_by_goals_on_the_table_and_in_the_air():
    import gymnasium as gym
    import numpy as np

    class Still:
        def __init__(self):
            self.greedy = []

        def predict(self, obs, deterministic=False):
            self.greedy.append(deterministic)
            return np.zeros(4, np.float32), None

    gym.register("FrontierHeightsTest-v0", entry_point=_GoalsUpOnOddSeeds)
    policy = Still()
    try:
        split = frontier.success_by_goal_height(policy, "FrontierHeightsTest-v0", episodes=5, seed=0)
        assert split == {"on the table": (3, 1.0), "in the air": (2, 0.0)}  # seeds 0, 2, 4 and 1, 3
        assert policy.greedy == [True] * 10
        # one episode (seed 0): no goal in the air, said as such rather than as a rate
        assert frontier.success_by_goal_height(policy, "FrontierHeightsTest-v0", episodes=1, seed=0) == \
            {"on the table": (1, 1.0), "in the air": (0, None)}
    finally:
        gym.registry.pop("FrontierHeightsTest-v0")


def test_heights_of_a_folder_that_is_no_run_is_one_line_and_exit_2(tmp_path, capsys):
    from conftest import load_script, unload_script

    script = load_script("bench_fetch_frontier")
    try:
        with pytest.raises(SystemExit) as stop:
            script.main(["--heights", str(tmp_path)])
    finally:
        unload_script("bench_fetch_frontier")
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # argparse's usage lines, then one line
    assert f" error: --heights {tmp_path}: " in err and "Traceback" not in err


def test_a_variant_of_the_preset_is_a_series_of_its_own_named_by_its_overrides():
    plain = [_row("ours", s, [0.1, 0.2]) for s in range(2)]
    variant = {**_row("ours", 0, [0.5, 0.9]), "set": ["env.start_in_gripper=0.5"]}
    series = frontier.frontier_rows([*plain, variant, _row("sb3", 0, [0.0, 0.1])], PRESET)
    assert {k: len(v) for k, v in series.items()} == {"ours": 2, "ours env.start_in_gripper=0.5": 1, "sb3": 1}
    assert frontier.side_name(series["ours env.start_in_gripper=0.5"]) == "her_crossq env.start_in_gripper=0.5"
    table = frontier.step_table([*plain, variant], PRESET)
    assert "her_crossq env.start_in_gripper=0.5 median" in table.splitlines()[0]
    assert "0.90 (n=1)" in table and "0.20 (n=2)" in table


def test_a_variant_runs_her_run_with_its_overrides_and_its_row_says_them(monkeypatch):
    import types

    from bench import ours
    from her_rl.folder.metrics import Point

    ran = []

    def fake(overrides, out=None):
        ran.append(list(overrides))
        points = [Point(step=10_000, value=0.25, wall_time=110.0), Point(step=20_000, value=0.5, wall_time=130.0)]
        return types.SimpleNamespace(metrics={"eval/success_rate": points})

    monkeypatch.setattr(ours, "run_ours", fake)
    monkeypatch.setattr("bench.likeforlike.training_start", lambda metrics, steps: 100.0)
    row = frontier.run_ours(PRESET, 3, ["eval.episodes=10"])
    assert ran == [[f"experiment={PRESET}", "seed=3", "eval.stop_when_solved=false", "progress=false", "threads=1",
                    "eval.episodes=10"]]
    assert row["set"] == ["eval.episodes=10"] and row["overrides"] == ran[0] and row["seed"] == 3
    assert row["evals"] == [[10_000, 0.25, 10.0], [20_000, 0.5, 30.0]]
    assert "set" not in frontier.run_ours(PRESET, 3)  # the preset itself: no variant


@pytest.mark.parametrize("argv, says", [
    (["--side", "sb3", "--set", "algo.k=2"], "--set algo.k=2: algo.k=2: the SB3 twin mirrors only env.start_in_gripper, algo.batch_size"),
    (["--side", "sb3", "--set", "env.start_in_gripper=0.5"], "--set env.start_in_gripper=0.5: Could not override 'env.start_in_gripper'"),
    (["--side", "ours", "--set", "eval.episodes=0"], "--set eval.episodes=0: eval.episodes=0 is not allowed"),
    (["--side", "ours", "--set", "no_such_key=1"], "--set no_such_key=1: Could not override 'no_such_key'"),
])
def test_a_bad_variant_is_one_line_and_exit_2(tmp_path, capsys, argv, says):
    err = _refused(["--preset", "fetch_push_frontier", "--seeds", "0", "--json", str(tmp_path / "r.json"), *argv], capsys)
    assert says in err and "Traceback" not in err, err
    assert not (tmp_path / "r.json").exists()


def test_a_twins_variant_mirrors_held_starts_and_is_a_series_of_its_own():
    pnp = "fetch_pick_and_place_frontier"
    held = frontier.preset_config(pnp).env.start_in_gripper
    assert held and frontier.twin(pnp)["start_in_gripper"] == held
    assert "start_in_gripper" not in frontier.twin(pnp, ["env.start_in_gripper=0"])
    frontier.check_twin_sets(["env.start_in_gripper=0"])
    with pytest.raises(ValueError, match="algo.prioritize=energy: the SB3 twin mirrors only env.start_in_gripper"):
        frontier.check_twin_sets(["algo.prioritize=energy"])  # the twin would run unchanged under its name
    with pytest.raises(ValueError, match="algo.precision=float32: the SB3 twin mirrors only"):
        frontier.check_twin_sets(["algo.precision=float32"])  # SB3 updates in float32 whatever ours does
    plain = {**_row("sb3", 0, [0.1]), "settings": {"differs": ["n_step: ours 3, the twin 1"]}}
    variant = {**plain, "seed": 1, "set": ["env.start_in_gripper=0"]}
    series = frontier.frontier_rows([plain, variant], PRESET)
    assert {k: len(v) for k, v in series.items()} == {"sb3": 1, "sb3 env.start_in_gripper=0": 1}
    assert frontier.side_name(series["sb3 env.start_in_gripper=0"]) == (
        "SB3 SAC + HER (1-step twin) env.start_in_gripper=0")


def test_a_variants_row_names_the_learner_and_evaluation_it_ran():
    from her_rl.folder.metrics import Point

    metrics = {"charts/SPS": [Point(400, 1000.0, 100.0)], "eval/success_rate": [Point(20_000, 1300.0, 0.25)]}
    sets = ["algo=her_crossq", "algo.episodes_per_cycle=8", "eval.episodes=20"]
    row = frontier.ours_row("fetch_slide_frontier", 0, ["experiment=fetch_slide_frontier", *sets], metrics, sets)
    assert (row["algo"], row["eval_episodes"], row["set"]) == ("her_crossq", 20, sets)
    assert row["evals"] == [[20_000, 0.25, 304.0]]  # seconds since training began: 1300 - (1000 - 400 / 100)
    plain = frontier.ours_row("fetch_slide_frontier", 0, ["experiment=fetch_slide_frontier"], metrics)
    assert (plain["algo"], plain["eval_episodes"]) == ("her_ddpg", 50) and "set" not in plain


def test_keep_runs_each_seed_in_its_own_kept_folder(tmp_path, monkeypatch):
    from conftest import load_script, unload_script

    ran = []

    def fake(preset, seed, sets=(), out=None):
        ran.append((preset, seed, out))
        return _row("ours", seed, [0.5])

    monkeypatch.setattr(frontier, "run_ours", fake)
    script = load_script("bench_fetch_frontier")
    try:
        code = script.main(["--side", "ours", "--seeds", "0", "2", "--json", str(tmp_path / "r.json"),
                            "--keep", str(tmp_path / "runs")])
    finally:
        unload_script("bench_fetch_frontier")
    assert code == 0
    assert ran == [(PRESET, 0, tmp_path / "runs" / f"{PRESET}-seed0"), (PRESET, 2, tmp_path / "runs" / f"{PRESET}-seed2")]
    assert [r["seed"] for r in json.loads((tmp_path / "r.json").read_text())["rows"]] == [0, 2]


def test_a_kept_run_folder_is_the_her_run_folder(tmp_path, monkeypatch):
    import types

    from bench import ours
    from her_rl.folder.metrics import Point

    given = []
    points = [Point(step=10_000, value=0.25, wall_time=110.0)]
    monkeypatch.setattr(ours, "run_ours", lambda overrides, out=None: given.append(out) or types.SimpleNamespace(
        metrics={"eval/success_rate": points}))
    monkeypatch.setattr("bench.likeforlike.training_start", lambda metrics, steps: 100.0)
    frontier.run_ours(PRESET, 1, out=tmp_path / "kept")
    frontier.run_ours(PRESET, 1)
    assert given == [tmp_path / "kept", None]


@pytest.mark.parametrize("argv, says", [
    (["--side", "sb3"], "--keep keeps our runs' folders: give it with --side ours"),
    (["--side", "ours"], "already exists; give a new folder"),
])
def test_keep_with_the_twin_or_a_folder_that_exists_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, argv, says):
    (tmp_path / "runs" / f"{PRESET}-seed0").mkdir(parents=True)
    monkeypatch.setattr(frontier, "run_ours", lambda *a, **k: pytest.fail("ran despite a bad --keep"))
    monkeypatch.setattr(frontier, "run_sb3", lambda *a, **k: pytest.fail("ran despite a bad --keep"))
    err = _refused(["--seeds", "0", "--json", str(tmp_path / "r.json"), "--keep", str(tmp_path / "runs"), *argv], capsys)
    assert says in err and "Traceback" not in err, err
    assert not (tmp_path / "r.json").exists()


def test_a_twins_batch_variant_runs_at_that_batch_and_a_bfloat16_learner_is_named_a_difference():
    slide = "fetch_slide_frontier"  # the preset: batch 1,024 in bfloat16
    frontier.check_twin_sets(["algo.batch_size=256"])
    assert frontier.twin(slide)["batch_size"] == frontier.preset_config(slide).algo.batch_size == 1024
    assert frontier.twin(slide, ["algo.batch_size=256"])["batch_size"] == 256
    differs = frontier.twin(slide, ["algo.precision=float32"])["differs"]
    assert not any(d.startswith("precision") for d in differs)  # ours in float32: only the returns differ
    assert any(d.startswith("precision") for d in frontier.twin(slide)["differs"])
    twin = {**_row("sb3", 0, [0.1]), "settings": {"differs": ["precision: ours bfloat16 matrix products, the twin float32"]}}
    assert frontier.side_name([twin]) == "SB3 SAC + HER (twin)"  # same returns: not named a 1-step twin



def test_the_twin_evaluates_on_the_episodes_ours_evaluates_on_at_each_env_step(tmp_path, monkeypatch):
    """A short run of the preset, its evaluation seeds spied: at every env step it evaluated at, the twin's
    draw (:func:`bench.frontier.ours_eval_seed` with the twin's cycle) is the same seed."""
    pytest.importorskip("gymnasium_robotics")
    import her_rl
    from her_rl.run import trainer

    seen = []
    real = trainer.evaluate

    def spy(agent, envs, seed, *args, **kwargs):
        seen.append(seed)
        return real(agent, envs, seed, *args, **kwargs)

    monkeypatch.setattr(trainer, "evaluate", spy)
    her_rl.train([f"experiment={PRESET}", "seed=3", "budget.env_steps=300", "eval.every_env_steps=100",
                  "eval.episodes=2", "eval.stop_when_solved=false", "progress=false", "algo.batch_size=8"],
                 out_dir=tmp_path / "run")
    cycle = frontier.twin(PRESET)["train_freq_episodes"] * 50
    assert seen == [frontier.ours_eval_seed(3, step, cycle) for step in (100, 200, 300)]
    assert len(set(seen)) == 3


def test_one_reset_seed_gives_the_same_fetch_episodes_in_ours_envs_and_the_twins():
    """What the twin's draw stands on: ``her_rl.envs.make_vec`` and ``gymnasium.make_vec`` (the twin's
    evaluation envs) reset with one seed start every episode alike."""
    pytest.importorskip("gymnasium_robotics")
    import gymnasium as gym
    import numpy as np
    from omegaconf import OmegaConf

    from her_rl.envs import make_vec

    env = OmegaConf.to_container(frontier.preset_config(PRESET).env, resolve=True)
    ours, twin = make_vec(env, 4, seed=0), gym.make_vec(env["id"], num_envs=4, vectorization_mode="sync")
    try:
        seed = frontier.ours_eval_seed(1, 10_000, 100)
        a, b = ours.reset(seed=seed)[0], twin.reset(seed=seed)[0]
        assert all(np.array_equal(a[k], b[k]) for k in ("observation", "achieved_goal", "desired_goal"))
        assert not np.array_equal(a["desired_goal"], twin.reset(seed=seed + 4)[0]["desired_goal"])
    finally:
        ours.close()
        twin.close()


def test_the_twins_run_draws_ours_episodes_and_its_row_says_so(monkeypatch):
    from bench import peers

    got = {}

    def fake_train_peer(settings, env_id, kwargs, seed, protocol, episodes, horizon, name, eval_seed_at=None):
        got["draws"] = [eval_seed_at(step) for step in (10_000, 20_000)]
        return peers.PeerRun([(10_000, 1.0, 0.1)], 10_000, 1.0), 0.0

    monkeypatch.setattr(zoo, "train_peer", fake_train_peer)
    row = frontier.run_sb3(PRESET, 2)
    assert got["draws"] == [frontier.ours_eval_seed(2, step, 100) for step in (10_000, 20_000)]
    assert row["eval_draws"] == "ours"


def _replay(heights, lengths, pos=0, capacity=None):
    """A hindsight replay's stored episodes as a checkpoint keeps them: the object's height per step."""
    import numpy as np

    h = np.asarray(heights, dtype=np.float32)
    achieved = np.zeros((*h.shape, 3), np.float32)
    achieved[..., 2] = h
    return {"capacity": capacity or len(h), "pos": pos, "size": len(h),
            "data": {"achieved_goal": achieved, "length": np.asarray(lengths),
                     "desired_goal": np.zeros((len(h), 3), np.float32)}}


def test_lift_rates_count_rises_within_each_episode_oldest_first():
    # episode 0 rises 4 cm, episode 1 rises 9 cm, episode 2 rises 9 cm only after its last step (not counted),
    # episode 3 sinks; the ring has wrapped at pos 2, so the oldest two are episodes 2 and 3
    replay = _replay([[0.02, 0.06, 0.02, 0.02], [0.02, 0.05, 0.11, 0.02], [0.02, 0.02, 0.02, 0.11],
                      [0.02, 0.0, 0.0, 0.0]], lengths=[3, 3, 2, 3], pos=2)
    assert frontier.lift_rates(replay, window=2) == [(0, 2, [0.0, 0.0]), (2, 4, [1.0, 0.5])]
    assert frontier.lift_rates({**replay, "capacity": 10, "pos": 4}, window=3) == \
        [(0, 3, [2 / 3, 1 / 3]), (3, 4, [0.0, 0.0])]


def test_lifts_reads_a_runs_replay_and_refuses_a_checkpoint_without_one(tmp_path, capsys):
    from dataclasses import asdict

    import torch
    from conftest import load_script, unload_script

    from her_rl.folder.checkpoint import RunState, rng_state, save

    run, bare = tmp_path / "run", tmp_path / "bare"
    replay = _replay([[0.0, 0.05], [0.0, 0.0]], [1, 1])
    replay["data"] = {k: torch.from_numpy(v) for k, v in replay["data"].items()}  # as a checkpoint stores them
    rest = {"runner": asdict(RunState()), "rng": rng_state(), "config": {}}  # what load asks of every checkpoint
    save({"agent": {"memory": {"episodes": replay}}, **rest}, run / "checkpoint.pt")
    script = load_script("bench_fetch_frontier")
    try:
        assert script.main(["--lifts", str(run), "--window", "2"]) == 0
        assert capsys.readouterr().out.splitlines()[1].split() == ["0", "-", "2", "0.500", "0.000"]
    finally:
        unload_script("bench_fetch_frontier")
    for agent in ({"actor": {}}, {"memory": torch.zeros(2)}):  # an on-policy learner's; a damaged file's
        save({"agent": agent, **rest}, bare / "checkpoint.pt")
        err = _refused(["--lifts", str(bare)], capsys)
        assert f"error: --lifts {bare}: its checkpoint holds no replay" in err
    assert "error: --window: at least 1" in _refused(["--lifts", str(run), "--window", "0"], capsys)
    tampered = [{**replay, "data": {**replay["data"], "length": torch.tensor([1, 2])}},  # 2 steps, 1 stored
                {**replay, "data": {**replay["data"], "achieved_goal": torch.zeros(2, 2)}},  # no goal axis
                {**replay, "size": 5}]  # more episodes than stored
    for episodes in tampered:
        save({"agent": {"memory": {"episodes": episodes}}, **rest}, bare / "checkpoint.pt")
        assert "do not fit together: not one her-rl wrote" in _refused(["--lifts", str(bare)], capsys)


class _Carrier:
    """A stand-in policy: fingers shut, the block moved straight to the goal (``drop``: fingers opened)."""

    def __init__(self, drop: bool = False):
        self.drop = drop

    def predict(self, obs, deterministic=True):
        import numpy as np

        block = obs["observation"][frontier.PANDA_PICK_AND_PLACE["object"]]
        move = np.clip((obs["desired_goal"] - block) * 10, -1, 1)
        return np.array([*move, 1.0 if self.drop else -1.0], np.float32), None


@pytest.mark.skipif(importlib.util.find_spec("panda_gym") is None, reason="needs the panda extra")
def test_carry_hands_a_lifted_block_to_the_policy_on_goals_in_the_air():
    in_air, handed, carried = frontier.carry_success(_Carrier(), "PandaPickAndPlace-v3", 12)
    assert 0 < in_air < 12 and handed >= in_air - 1  # the grasp lifts the block (goals on the table not played)
    assert carried >= handed - 1  # a policy that holds and carries succeeds
    dropped = frontier.carry_success(_Carrier(drop=True), "PandaPickAndPlace-v3", 12)
    assert dropped[:2] == (in_air, handed) and dropped[2] <= handed // 3  # a low goal may lie within 5 cm of the table


def test_carry_refuses_a_run_of_another_env(tmp_path, capsys, monkeypatch):
    import her_rl

    monkeypatch.setattr(her_rl, "load", lambda run: type("P", (), {"env_id": "FetchPickAndPlace-v4"})())
    err = _refused(["--carry", str(tmp_path)], capsys)
    assert "it trains FetchPickAndPlace-v4; the scripted grasp reads panda-gym's PickAndPlace" in err
