"""Videos of trained agents: her_rl.saved.video and ``her-run load=RUN_DIR video=true``."""

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import forked
import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("imageio", reason='the video extra is not installed (pip install -e ".[video]")')
pytest.importorskip("imageio_ffmpeg", reason='the video extra is not installed (pip install -e ".[video]")')

import imageio.v2 as imageio  # noqa: E402
import imageio.v3 as iio  # noqa: E402

from her_rl.saved import video  # noqa: E402


ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
HER_RUN = str(Path(sys.executable).with_name("her-run"))  # the conftest fixture is per test, runs are per module


def frames(path) -> list[np.ndarray]:
    if str(path).endswith(".gif"):
        return list(iio.imread(path, index=None))
    reader = imageio.get_reader(path, format="FFMPEG")
    try:
        return [frame for frame in reader.iter_data()]  # list(reader) would ask len(): inf for ffmpeg
    finally:
        reader.close()


def gif_seconds(path) -> float:
    from PIL import Image

    with Image.open(path) as image:
        total = 0
        for i in range(image.n_frames):
            image.seek(i)
            total += image.info["duration"]
    return total / 1000


class RandomPolicy:
    """The duck-typed interface record() uses, acting at random in a real env."""

    def __init__(self, env_id, make=None, **kwargs):
        self.env_id, self.make, self.kwargs = env_id, make, kwargs

    def make_env(self, render_mode=None, **kwargs):
        env = self.make(render_mode) if self.make else gym.make(self.env_id, render_mode=render_mode, **self.kwargs)
        self.space = env.action_space
        self.space.seed(0)
        return env

    def predict(self, observation, deterministic=True):
        return self.space.sample(), None


# ---- units -----------------------------------------------------------------------------------

def test_tiny_frames_are_scaled_up_pixel_for_pixel_and_padded_to_macro_blocks():
    tiny = np.arange(3 * 5 * 3, dtype=np.uint8).reshape(3, 5, 3) * 5
    big = video.fit_frame(tiny)
    assert big.dtype == np.uint8 and big.shape[2] == 3
    assert big.shape[0] % 16 == 0 and big.shape[1] % 16 == 0 and min(big.shape[:2]) >= 200
    assert {tuple(p) for p in big.reshape(-1, 3)} == {tuple(p) for p in tiny.reshape(-1, 3)}  # nearest neighbour
    factor = 67  # ceil(200 / 3): 201 x 335 pixels, padded to 208 x 336 (3 rows above, 1 column right)
    assert big.shape[:2] == (208, 336)
    assert (big[3:3 + factor, :factor] == tiny[0, 0]).all() and (big[:3] == big[3]).all()
    assert video.fit_frame(np.zeros((400, 600, 3), np.uint8)).shape == (400, 608, 3)  # padded only
    assert video.fit_frame(np.ones((240, 240, 3), np.float32)).max() == 255  # floats in [0, 1]
    with pytest.raises(ValueError, match="H x W x 3"):
        video.fit_frame(np.zeros((4, 4, 5)))


def test_record_writes_decodable_episodes_and_a_shorter_recording_replaces_a_longer_one(tmp_path):
    folder = tmp_path / "videos"
    paths = video.record(RandomPolicy("her_rl/Push-v0"), folder, episodes=3, seed=1)
    assert [p.name for p in paths] == ["episode-0.mp4", "episode-1.mp4", "episode-2.mp4"]
    for path in paths:
        images = frames(path)
        assert len(images) == 51  # the reset frame and 50 steps (push truncates at 50)
        assert images[0].shape == (240, 240, 3)
    (folder / ".episode-4.partial.mp4").write_bytes(b"a recording killed mid-episode")  # left by a kill
    again = video.record(RandomPolicy("her_rl/Push-v0"), folder, episodes=1, seed=1)
    assert sorted(p.name for p in folder.iterdir()) == ["episode-0.mp4"] == [p.name for p in again]
    gif = video.record(RandomPolicy("her_rl/Drag-v0"), folder, episodes=1, fmt="gif", fps=20)
    assert sorted(p.name for p in folder.iterdir()) == ["episode-0.gif", "episode-0.mp4"]
    assert len(frames(gif[0])) >= 10
    assert gif_seconds(gif[0]) == pytest.approx(51 / 20)  # pillow merges repeated frames, not their time


class NoPixels(gym.Env):
    metadata = {"render_modes": ["ansi"]}
    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        return 0, {}

    def render(self):
        return "0"


class BrokenRender(NoPixels):
    metadata = {"render_modes": ["rgb_array"]}

    def render(self):
        raise RuntimeError("no GL context")


@pytest.mark.parametrize("env_class, message", [
    (NoPixels, "cannot render rgb_array frames (its render modes: ansi)"),
    (BrokenRender, "failed to render an rgb_array frame: no GL context"),
])
def test_an_env_that_cannot_draw_is_refused_before_anything_is_written(tmp_path, env_class, message):
    with pytest.raises(video.VideoError, match=message.replace("(", r"\(").replace(")", r"\)")):
        video.record(RandomPolicy("x", make=lambda mode: env_class(mode)), tmp_path / "videos")
    assert not (tmp_path / "videos").exists()


# ---- her-run ---------------------------------------------------------------------------------

TRAIN = {  # a few thousand env steps: the agent need not be good, its episodes must be recorded
    "push": ["algo=her_dqn", "env=push", "budget.env_steps=1000"],
    "drag": ["algo=her_dqn", "env=drag", "budget.env_steps=1000"],
    "bitflip": ["algo=her_dqn", "env=bitflip", "n=20", "budget.env_steps=1000"],
    "cartpole": ["algo=ppo", "env=cartpole", "budget.env_steps=2048"],
    "fetch_reach": ["algo=her_ddpg", "env=fetch_reach", "budget.env_steps=500"],  # MuJoCo, offscreen through EGL
}
NEEDS = {"cartpole": ("pygame",), "fetch_reach": ("mujoco", "gymnasium_robotics")}  # optional packages


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Train each target once, on demand: ``runs(name)`` is the run folder (relative to ``runs.cwd``)."""
    cwd = tmp_path_factory.mktemp("video_runs")
    done = {}

    def get(name):
        if name not in done:
            p = forked.run([HER_RUN, *TRAIN[name], "progress=false", f"hydra.run.dir=runs/{name}"], cwd=cwd,
                           env=ENV, text=True, timeout=300)
            assert p.returncode == 0, p.stderr
            done[name] = f"runs/{name}"
        return done[name]
    get.cwd = cwd
    return get


@pytest.mark.parametrize("name", ["push", "drag", "bitflip", "cartpole", "fetch_reach"])
def test_load_video_writes_decodable_mp4s_and_prints_their_paths(her_run, runs, name):
    missing = [m for m in NEEDS.get(name, ()) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pygame: the video extra; MuJoCo: the robotics extra)")
    run = runs(name)
    p = forked.run([her_run, f"load={run}", "video=true"], cwd=runs.cwd, env=ENV,
                   text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    printed = p.stdout.split()
    assert printed == [f"{run}/videos/episode-{i}.mp4" for i in range(3)]
    for path in printed:
        images = frames(runs.cwd / path)
        assert len(images) >= 10
        assert images[0].shape[0] % 16 == 0 and images[0].shape[1] % 16 == 0 and min(images[0].shape[:2]) >= 200
    assert not (runs.cwd / run / "eval.json").exists()  # recording replaces the evaluation


def test_video_episodes_and_format_are_taken_from_the_command(her_run, runs):
    run = runs("push")
    p = forked.run([her_run, f"load={run}", "video=true", "video.episodes=2", "video.format=gif",
                    "seed=4"], cwd=runs.cwd, env=ENV, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [f"{run}/videos/episode-0.gif", f"{run}/videos/episode-1.gif"]
    assert gif_seconds(runs.cwd / run / "videos" / "episode-1.gif") == pytest.approx(51 / 10)  # push: 10 fps


@pytest.mark.parametrize("args, message", [
    (["video=true"], "video keys need load=RUN_DIR"),  # no load=: videos are recorded from a trained run
    (["video.enabled=true"], "video keys need load=RUN_DIR"),
    (["video.episodes=4"], "video keys need load=RUN_DIR"),
    (["load=runs/push", "video.episodes=2"], "video.episodes is given but video is off"),
    (["load=runs/push", "video=true", "n=3"], "only budget.*"),  # the run's own keys still cannot change
    (["load=runs/push", "video.enabled=true", "video.episodes=0"], "video.episodes must be an integer in [1, 1000]"),
])
def test_bad_video_commands_exit_2_with_one_line_and_write_nothing(her_run, runs, args, message):
    runs("push")
    before = sorted(str(p.relative_to(runs.cwd)) for p in runs.cwd.rglob("*"))
    p = forked.run([her_run, *args, "progress=false"], cwd=runs.cwd, env=ENV, text=True,
                   timeout=300)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr and p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    assert sorted(str(p.relative_to(runs.cwd)) for p in runs.cwd.rglob("*")) == before


@pytest.mark.parametrize("patch, message", [
    ("modes", "cannot render rgb_array frames (its render modes: ansi)"),
    ("raises", "failed to render an rgb_array frame: no display"),
])
def test_load_video_of_an_env_that_cannot_draw_exits_2_without_a_videos_folder(runs, monkeypatch, capsys, patch,
                                                                               message):
    from her_rl import cli
    from her_rl.envs.table import TableEnv

    run = f"runs/cannot-draw-{patch}"  # a copy without the videos an earlier test recorded
    shutil.copytree(runs.cwd / runs("drag"), runs.cwd / run, ignore=shutil.ignore_patterns("videos"))
    if patch == "modes":
        monkeypatch.setattr(TableEnv, "metadata", {"render_modes": ["ansi"], "render_fps": 10})
    else:
        monkeypatch.setattr(TableEnv, "render", lambda self: (_ for _ in ()).throw(RuntimeError("no display")))
    monkeypatch.chdir(runs.cwd)
    monkeypatch.setattr(sys, "argv", ["her-run", f"load={run}", "video=true"])
    with pytest.raises(SystemExit) as stop:
        cli.main()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.strip().count("\n") == 0
    assert not (runs.cwd / run / "videos").exists()
