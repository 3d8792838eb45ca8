"""Push and drag rules: contact-only pushing, grip-only dragging, table bounds, goal-env API, batching."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import her_rl.envs  # noqa: F401  (registers her_rl/Push-v0 and her_rl/Drag-v0)
from her_rl.envs.drag import GRIP, RELEASE, DragEnv, DragVectorEnv
from her_rl.envs.push import PushEnv, PushVectorEnv
from her_rl.envs.table_core import COMPASS, compute_reward
from her_rl.envs.table_settings import check_table_kwargs

R = 0.05  # block radius at the default block_size 0.1
E, NE, N, NW, W, SW, S, SE = range(8)


def toward_block(obs, rng, drag=False, noise=0.2):
    """Mostly the compass move that points at the block (many contacts, blocks shoved into walls)."""
    rel = obs["observation"][:, 4:6]
    best = np.argmax(rel @ COMPASS.T, axis=1)
    n = 10 if drag else 8
    return np.where(rng.random(len(rel)) < noise, rng.integers(0, n, len(rel)), best)


def continuous_toward_block(obs, rng, drag=False):
    rel = obs["observation"][:, 4:6]
    a = 2.0 * rel / (np.linalg.norm(rel, axis=1, keepdims=True) + 1e-9) + rng.normal(0, 0.7, rel.shape)
    if drag:
        a = np.concatenate([a, rng.normal(0.3, 1.0, (len(rel), 1))], axis=1)
    return a.astype(np.float32)


def scripted(obs, rng, drag, actions, noise=0.2):
    """A noisy hand-written controller (push from behind the block; grip it and carry it): it
    reaches goals, so successes and terminations happen within a few dozen steps."""
    o, goal = obs["observation"], obs["desired_goal"]
    g, b, holding = o[:, 0:2], o[:, 2:4], o[:, 10] > 0
    to_goal = (goal - b) / (np.linalg.norm(goal - b, axis=1, keepdims=True) + 1e-9)
    if drag:
        target = np.where(holding[:, None], g + to_goal, b)
        grip = np.linalg.norm(b - g, axis=1) < 0.08
    else:
        behind = b - 1.3 * R * to_goal
        target = np.where((np.linalg.norm(g - behind, axis=1) < 0.03)[:, None], b + to_goal, behind)
    direction = target - g
    random = rng.random(len(g)) < noise
    if actions == "discrete":
        a = np.argmax(direction @ COMPASS.T, axis=1)
        if drag:
            a = np.where(grip & ~holding, GRIP, a)
        return np.where(random, rng.integers(0, 10 if drag else 8, len(g)), a)
    a = direction / (np.abs(direction).max(axis=1, keepdims=True) + 1e-9) + random[:, None] * rng.normal(0, 1, g.shape)
    if drag:
        a = np.concatenate([a, np.where(grip, 1.0, -1.0)[:, None]], axis=1)
    return a.astype(np.float32)


@pytest.mark.parametrize("env_id", ["her_rl/Push-v0", "her_rl/Drag-v0"])
@pytest.mark.parametrize("actions", ["discrete", "continuous"])
def test_gymnasium_env_checker_passes(env_id, actions):
    env = gym.make(env_id, actions=actions, render_mode="rgb_array")
    check_env(env.unwrapped)
    assert env.action_space == (gym.spaces.Discrete(10 if "Drag" in env_id else 8) if actions == "discrete"
                                else gym.spaces.Box(-1, 1, (3 if "Drag" in env_id else 2,), np.float32))


def test_push_moves_the_block_only_by_contact_and_along_the_push():
    env = PushEnv()
    env.reset(seed=0)
    env.set_state(gripper=[0.30, 0.50], block=[0.50, 0.50], goal=[0.9, 0.9])
    for action in [W, N, S, SW, NW, W]:  # moving away or past: never touches
        obs, *_ = env.step(action)
        np.testing.assert_array_equal(obs["achieved_goal"], np.float32([0.5, 0.5]))
        assert np.all(obs["observation"][8:10] == 0)
    env.set_state(gripper=[0.44, 0.50], block=[0.50, 0.50], goal=[0.9, 0.9])
    obs, *_ = env.step(E)  # gripper to 0.49, 0.01 deep: the block is pushed to 0.49 + r
    np.testing.assert_allclose(obs["observation"][0:4], [0.49, 0.5, 0.54, 0.5], atol=1e-6)
    np.testing.assert_allclose(obs["observation"][6:10], [0.05, 0, 0.04, 0], atol=1e-6)  # velocities
    before = obs["achieved_goal"].copy()
    obs, *_ = env.step(NE)  # off-centre touch: the block is pushed radially, out of the gripper
    moved, rel = obs["achieved_goal"] - before, obs["observation"][4:6]
    assert np.linalg.norm(rel) == pytest.approx(R, abs=1e-6) and np.linalg.norm(moved) > 0.005
    assert moved @ rel / np.linalg.norm(moved) / np.linalg.norm(rel) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("actions", ["discrete", "continuous"])
def test_push_gripper_never_inside_block_and_everything_stays_on_the_table(actions):
    envs = PushVectorEnv(64, seed=1, actions=actions, max_episode_steps=200)
    obs, _ = envs.reset(seed=1)
    rng = np.random.default_rng(0)
    space = envs.single_observation_space["observation"]
    pushes = 0
    for _ in range(400):
        a = toward_block(obs, rng) if actions == "discrete" else continuous_toward_block(obs, rng)
        prev = obs["observation"]
        obs, *_ = envs.step(a)
        o = obs["observation"]
        g, b = o[:, 0:2], o[:, 2:4]
        dist = np.linalg.norm(b - g, axis=1)
        assert dist.min() >= R - 1e-6
        assert b.min() >= R - 1e-7 and b.max() <= 1 - R + 1e-7 and g.min() >= 0 and g.max() <= 1
        assert np.all(o >= space.low) and np.all(o <= space.high)
        moved = np.any(o[:, 8:10] != 0, axis=1)
        # the block moves only when touched: it ends touching the gripper, which started within reach
        np.testing.assert_allclose(dist[moved], R, atol=1e-5)
        assert np.all(np.linalg.norm(prev[moved, 4:6], axis=1) <= R + 0.05 * np.sqrt(2) + 1e-6)
        pushes += int(moved.sum())
    assert pushes > 1000


def test_push_into_a_corner_keeps_the_block_on_the_table():
    for actions in ["discrete", "continuous"]:
        env = PushEnv(actions=actions)
        env.reset(seed=0)
        obs = env.set_state(gripper=[0.3, 0.3], block=[0.2, 0.2], goal=[0.8, 0.8])
        for _ in range(100):  # straight at the block, which is pushed diagonally into the corner
            rel = obs["observation"][4:6]
            obs, *_ = env.step(SW if actions == "discrete" else rel / np.abs(rel).max())
            g, b = obs["observation"][0:2], obs["achieved_goal"]
            assert np.all(b >= R - 1e-7) and np.linalg.norm(b - g) >= R - 1e-6 and np.all(g >= 0)
        np.testing.assert_allclose(b, [R, R], atol=1e-6)  # wedged in the corner


def test_drag_moves_the_block_only_while_gripped():
    env = DragEnv()  # grip_reach = r + step = 0.1
    env.reset(seed=0)
    env.set_state(gripper=[0.35, 0.5], block=[0.5, 0.5], goal=[0.9, 0.9])
    for action in [E] * 6:  # passes right over the block: contact never moves it
        obs, *_ = env.step(action)
        np.testing.assert_array_equal(obs["achieved_goal"], np.float32([0.5, 0.5]))
    assert obs["observation"][0] == pytest.approx(0.65, abs=1e-6)
    obs, *_ = env.step(GRIP)  # 0.15 away: out of reach, nothing happens
    assert obs["observation"][10] == 0.0 and obs["observation"][0] == pytest.approx(0.65, abs=1e-6)
    for _ in range(2):
        obs, *_ = env.step(W)
        np.testing.assert_array_equal(obs["achieved_goal"], np.float32([0.5, 0.5]))
    obs, *_ = env.step(GRIP)  # 0.05 away: in reach, grip closes; grip steps do not move
    assert obs["observation"][10] == 1.0 and obs["observation"][0] == pytest.approx(0.55, abs=1e-6)
    for _ in range(3):
        obs, *_ = env.step(N)
    np.testing.assert_allclose(obs["achieved_goal"], [0.5, 0.65], atol=1e-6)  # followed the gripper
    np.testing.assert_allclose(obs["observation"][8:10], [0, 0.05], atol=1e-6)
    obs, *_ = env.step(RELEASE)
    assert obs["observation"][10] == 0.0
    obs, *_ = env.step(S)
    np.testing.assert_allclose(obs["achieved_goal"], [0.5, 0.65], atol=1e-6)  # released: stays
    np.testing.assert_allclose(obs["observation"][0:2], [0.55, 0.6], atol=1e-6)


def test_drag_into_a_wall_moves_gripper_and_block_together_and_continuous_grip():
    env = DragEnv(actions="continuous")
    env.reset(seed=0)
    env.set_state(gripper=[0.9, 0.5], block=[0.85, 0.5], goal=[0.1, 0.1])
    obs, *_ = env.step(np.float32([0, 0, -1]))  # open: nothing held
    assert obs["observation"][10] == 0.0
    for _ in range(10):
        obs, *_ = env.step(np.float32([1, 0.2, 1]))  # closed while moving towards the east wall
    o = obs["observation"]
    assert o[10] == 1.0 and o[2] == pytest.approx(1 - R, abs=1e-6)  # block stopped by the wall ...
    np.testing.assert_allclose(o[4:6], [-0.05, 0.0], atol=1e-5)  # ... and the gripper with it
    obs, *_ = env.step(np.float32([-1, 0, 0]))  # a[2] <= 0 releases before moving
    assert obs["observation"][10] == 0.0 and obs["observation"][2] == pytest.approx(1 - R, abs=1e-6)


@pytest.mark.parametrize("actions", ["discrete", "continuous"])
def test_drag_block_moves_only_while_held_and_exactly_with_the_gripper(actions):
    envs = DragVectorEnv(64, seed=2, actions=actions)
    obs, _ = envs.reset(seed=2)
    rng = np.random.default_rng(1)
    held_moves = 0
    for _ in range(300):
        obs, *_ = envs.step(scripted(obs, rng, True, actions, noise=0.3))
        o = obs["observation"]
        moved = np.any(o[:, 8:10] != 0, axis=1)
        assert np.all(o[moved, 10] == 1.0)  # never by contact
        np.testing.assert_allclose(o[moved, 8:10], o[moved, 6:8], atol=1e-6)  # same displacement
        assert o[:, 2:4].min() >= R - 1e-7 and o[:, 2:4].max() <= 1 - R + 1e-7
        held_moves += int(moved.sum())
    assert held_moves > 5000


@pytest.mark.parametrize("cls", [PushVectorEnv, DragVectorEnv])
def test_reward_and_is_success_agree_with_compute_reward(cls):
    n = 32
    envs = cls(n, seed=0, success_distance=0.05)
    envs.reset(seed=0)
    x = np.linspace(0.1, 0.6, n, dtype=np.float32)
    rows = np.arange(n)
    ones = np.ones(n, np.float32)
    obs = envs.set_state(rows, np.stack([x - 0.06, 0.5 * ones], 1), np.stack([x, 0.5 * ones], 1),
                         np.stack([x + 0.2, 0.5 * ones], 1), holding=cls is DragVectorEnv)
    successes = 0
    for _ in range(12):  # push/drag east: every copy passes through its goal, at different steps
        ag, dg = obs["achieved_goal"], obs["desired_goal"]
        obs, reward, terminated, truncated, info = envs.step(np.full(n, E))
        assert reward.dtype == np.float32
        np.testing.assert_array_equal(reward, compute_reward(obs["achieved_goal"], obs["desired_goal"], None, 0.05))
        np.testing.assert_array_equal(reward, envs.compute_reward(obs["achieved_goal"], obs["desired_goal"], None))
        np.testing.assert_array_equal(info["is_success"], reward == 0)
        assert not terminated.any()
        assert not envs.compute_terminated(obs["achieved_goal"], obs["desired_goal"], None).any()
        successes += int(info["is_success"].sum())
    assert 0 < successes < 12 * n
    batch = np.stack([obs["achieved_goal"], dg])  # leading batch dims [2, n]
    r = compute_reward(batch, np.stack([dg, dg]), None, 0.05)
    assert r.shape == (2, n) and np.all(r[1] == 0)


def test_terminate_on_success():
    env = PushEnv(terminate_on_success=True)
    env.reset(seed=0)
    env.set_state(gripper=[0.40, 0.5], block=[0.46, 0.5], goal=[0.62, 0.5])
    flags = []
    for _ in range(3):  # block to 0.50, 0.55, 0.60
        obs, reward, terminated, truncated, info = env.step(E)
        flags.append((reward, terminated, truncated, info["is_success"]))
        assert env.compute_terminated(obs["achieved_goal"], obs["desired_goal"], info) == terminated
    assert flags[-1] == (0.0, True, False, True) and flags[0] == (-1.0, False, False, False)
    assert PushEnv().compute_terminated(np.zeros((5, 2)), np.zeros((5, 2)), None).tolist() == [False] * 5


@pytest.mark.parametrize("cls", [PushVectorEnv, DragVectorEnv])
def test_episodes_last_max_episode_steps_with_next_step_autoreset(cls):
    envs = cls(16, seed=0, max_episode_steps=7)
    obs, _ = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    for t in range(1, 25):
        obs, reward, terminated, truncated, _ = envs.step(rng.integers(0, 8, 16))
        phase = t % 8  # 7 steps, then the reset step
        assert truncated.all() == (phase == 7) and truncated.any() == (phase == 7) and not terminated.any()
        if phase == 0:  # reset step: action ignored, reward 0, fresh start
            assert np.all(reward == 0) and np.all(obs["observation"][:, 6:] == 0)
    assert envs.max_episode_steps == 7
    lockstep = cls(4, seed=0, max_episode_steps=3, autoreset=False)
    lockstep.reset()
    flags = [lockstep.step(np.zeros(4, int))[3].all() for _ in range(5)]
    assert flags == [False, False, True, True, True]  # no reset: copies keep stepping


@pytest.mark.parametrize("make_kwargs, length", [({}, 50), ({"max_episode_steps": 20}, 20)])
def test_gymnasium_make_episode_length(make_kwargs, length):
    # gymnasium.make's own max_episode_steps is a TimeLimit wrapper; none is registered, so
    # without it the env's own limit (50) is the only one.
    env = gym.make("her_rl/Push-v0", **make_kwargs)
    env.reset(seed=0)
    flags = [env.step(env.action_space.sample())[3] for _ in range(length)]
    assert flags == [False] * (length - 1) + [True]


def test_reset_never_starts_at_the_goal_or_inside_the_block():
    envs = DragVectorEnv(2048, seed=0, success_distance=0.5, max_episode_steps=1)
    obs, _ = envs.reset(seed=0)
    for _ in range(3):
        for o in (obs,):
            ag, dg, g = o["achieved_goal"], o["desired_goal"], o["observation"][:, 0:2]
            assert np.linalg.norm(ag - dg, axis=1).min() > 0.5
            assert np.linalg.norm(ag - g, axis=1).min() >= R
            assert ag.min() >= R and ag.max() <= 1 - R and dg.min() >= R and dg.max() <= 1 - R
            assert np.all(o["observation"][:, 10] == 0)
        obs, *_ = envs.step(np.zeros(2048, int))
        obs, *_ = envs.step(np.zeros(2048, int))  # the autoreset step
    assert np.unique(obs["desired_goal"], axis=0).shape[0] == 2048
    first, again = envs.reset(seed=5)[0], envs.reset(seed=5)[0]  # reset(seed=...) reseeds
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
    assert not np.array_equal(first["desired_goal"], envs.reset(seed=6)[0]["desired_goal"])


@pytest.mark.parametrize("task, actions", [("push", "discrete"), ("push", "continuous"),
                                           ("drag", "discrete"), ("drag", "continuous")])
def test_batched_env_agrees_with_single_envs_through_autoresets(task, actions):
    vec_cls, single_cls = (PushVectorEnv, PushEnv) if task == "push" else (DragVectorEnv, DragEnv)
    n, kwargs = 12, {"max_episode_steps": 30, "actions": actions, "success_distance": 0.2, "terminate_on_success": True,
                     "gripper_range": None, "goal_range": None}  # far goals: some episodes are truncated
    envs = vec_cls(n, seed=3, **kwargs)
    singles = [single_cls(**kwargs) for _ in range(n)]
    obs, _ = envs.reset(seed=3)

    def adopt(i, o):  # a single env takes over the batched copy's fresh episode
        singles[i].reset(seed=i)
        singles[i].set_state(o["observation"][i, 0:2], o["observation"][i, 2:4], o["desired_goal"][i])

    for i in range(n):
        adopt(i, obs)
    rng = np.random.default_rng(0)
    ended = np.zeros(n, bool)
    counts = np.zeros(3)
    for _ in range(80):
        a = scripted(obs, rng, task == "drag", actions)
        obs, reward, terminated, truncated, info = envs.step(a)
        for i in range(n):
            if ended[i]:
                assert reward[i] == 0 and not terminated[i] and not truncated[i]
                assert np.all(obs["observation"][i, 6:10] == 0)  # a fresh start: the action was ignored
                adopt(i, obs)
                continue
            o, r, te, tr, inf = singles[i].step(a[i])
            np.testing.assert_array_equal(o["observation"], obs["observation"][i])
            np.testing.assert_array_equal(o["desired_goal"], obs["desired_goal"][i])
            assert (r, te, tr, inf["is_success"]) == (reward[i], terminated[i], truncated[i], info["is_success"][i])
        ended = terminated | truncated
        counts += [terminated.sum(), truncated.sum(), np.any(obs["observation"][:, 8:10] != 0, axis=1).sum()]
    assert np.all(counts > 0)  # successes, time-outs and block moves all happened


BAD = [("table_size", 0), ("table_size", -1.0), ("table_size", float("inf")), ("table_size", float("nan")),
       ("table_size", "1"), ("table_size", True), ("block_size", 1.0), ("block_size", 0),
       ("step_size", 0.06), ("step_size", -0.01), ("success_distance", 0.0), ("success_distance", 0.7),
       ("max_episode_steps", 0), ("max_episode_steps", 2.5), ("max_episode_steps", True),
       ("terminate_on_success", 1), ("terminate_on_success", "yes"), ("actions", "box"), ("foo", 1)]


@pytest.mark.parametrize("key, value", BAD)
@pytest.mark.parametrize("cls", [PushEnv, DragVectorEnv])
def test_bad_kwargs_raise_value_error_naming_the_key(cls, key, value):
    with pytest.raises(ValueError, match=key):
        cls(**({"num_envs": 2} if cls is DragVectorEnv else {}), **{key: value})
    with pytest.raises(ValueError, match=key):
        check_table_kwargs("drag", **{key: value})


def test_grip_reach_is_a_drag_setting_and_is_checked():
    assert check_table_kwargs("drag")["grip_reach"] == pytest.approx(0.1)
    assert check_table_kwargs("push", table_size=2.0)["success_distance"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="grip_reach"):
        check_table_kwargs("push", grip_reach=0.1)
    with pytest.raises(ValueError, match="grip_reach"):
        DragEnv(grip_reach=-0.1)


def test_render_draws_table_goal_block_and_gripper():
    env = DragEnv(render_mode="rgb_array")
    env.reset(seed=0)
    env.set_state(gripper=[0.2, 0.2], block=[0.25, 0.2], goal=[0.7, 0.8])
    img = env.render()
    assert img.shape == (240, 240, 3) and img.dtype == np.uint8

    def pixel(x, y):
        return tuple(img[int((1 - y) * 240), int(x * 240)])

    table, block, gripper = pixel(0.5, 0.5), pixel(0.27, 0.2), pixel(0.2, 0.2)
    assert block == (200, 60, 50) and gripper == (40, 60, 200)
    assert pixel(0.7, 0.8) not in (table, block, gripper) and pixel(0.7, 0.8) == pixel(0.72, 0.8)  # goal disk
    env.step(GRIP)
    img = env.render()
    assert tuple(img[int(0.8 * 240), int(0.2 * 240)]) == (240, 180, 0)  # holding: another colour
    assert PushEnv().render() is None
    venv = PushVectorEnv(3, render_mode="rgb_array")
    venv.reset(seed=0)
    assert venv.render().shape == (240, 240, 3)


@pytest.mark.parametrize("task", ["push", "drag"])
def test_start_ranges_place_gripper_and_goal_near_the_block_as_in_fetch(task):
    cls = PushVectorEnv if task == "push" else DragVectorEnv
    obs, _ = cls(4000, seed=0).reset()
    o = obs["observation"]
    gripper, block, goal = o[:, 0:2], o[:, 2:4], obs["desired_goal"]
    assert np.abs(gripper - block).max() <= 0.15 + 1e-6 and np.abs(goal - block).max() <= 0.15 + 1e-6
    assert np.linalg.norm(gripper - block, axis=1).min() >= 0.05 - 1e-6  # never inside the block
    assert np.linalg.norm(goal - block, axis=1).min() > 0.05  # never at the goal
    assert np.abs(goal - block).max() > 0.14  # the whole square is used
    obs, _ = cls(4000, seed=0, gripper_range=None, goal_range=None).reset()
    o = obs["observation"]
    assert np.abs(o[:, 0:2] - o[:, 2:4]).max() > 0.5 and np.abs(obs["desired_goal"] - o[:, 2:4]).max() > 0.5
    with pytest.raises(ValueError, match="goal_range"):
        cls(2, goal_range=0.04)
    with pytest.raises(ValueError, match="gripper_range"):
        cls(2, gripper_range=0.01)
