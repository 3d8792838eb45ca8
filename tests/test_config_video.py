"""The video keys (her_rl.config.video): the short form, their defaults, and when they are accepted."""

import pytest

from her_rl.config import video as keys
from her_rl.errors import ConfigError


def test_short_form_becomes_the_enabled_key_and_nothing_else_changes():
    given = ["load=runs/a", "video=true", "video.episodes=5", "+video=False", "n=3", "video.format=gif"]
    assert keys.expand_overrides(given) == ["load=runs/a", "video.enabled=true", "video.episodes=5",
                                             "+video.enabled=false", "n=3", "video.format=gif"]
    assert keys.settings(True) == {**keys.DEFAULTS, "enabled": True}
    assert keys.settings({"enabled": True, "episodes": 5})["episodes"] == 5


def test_video_keys_without_load_and_video_keys_without_video_are_refused():
    with pytest.raises(ConfigError, match="need load=RUN_DIR"):
        keys.refuse_without_load({"load": None, "video": {"enabled": False}}, ["video.episodes=2"])
    with pytest.raises(ConfigError, match="need load=RUN_DIR"):
        keys.refuse_without_load({"load": None, "video": {"enabled": True}}, None)
    keys.refuse_without_load({"load": "runs/a", "video": {"enabled": True}}, ["video.enabled=true"])
    keys.refuse_without_load({"load": None, "video": {"enabled": False}}, ["n=3"])
    with pytest.raises(ConfigError, match="video.episodes is given but video is off"):
        keys.check_given(keys.settings(None), ["load=a", "video.episodes=2"])
    keys.check_given(keys.settings(True), ["load=a", "video.enabled=true", "video.episodes=2"])
