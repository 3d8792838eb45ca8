"""gymnasium's own RecordVideo wrapper works with the video extra (it writes through moviepy)."""

import gymnasium as gym
import pytest


def test_gymnasium_record_video_writes_an_mp4(tmp_path):
    pytest.importorskip("moviepy", reason='video extra not installed: pip install -e ".[video]"')
    pytest.importorskip("pygame", reason='video extra not installed: pip install -e ".[video]"')
    env = gym.wrappers.RecordVideo(gym.make("CartPole-v1", render_mode="rgb_array"), str(tmp_path / "videos"),
                                   episode_trigger=lambda episode: True, disable_logger=True)
    env.reset(seed=0)
    for _ in range(10):
        env.step(env.action_space.sample())
    env.close()
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1000
