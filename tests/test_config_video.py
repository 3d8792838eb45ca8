"""The video keys: the short form (her_rl.config.compose), their defaults and their one check (her_rl.config.checks)."""

import pytest

from her_rl.config import checks as keys
from her_rl.config.compose import expand_overrides
from her_rl.errors import ConfigError


def test_short_form_becomes_the_enabled_key_and_nothing_else_changes():
    given = ["load=runs/a", "video=true", "video.episodes=5", "+video=False", "n=3", "video.format=gif"]
    assert expand_overrides(given) == ["load=runs/a", "video.enabled=true", "video.episodes=5",
                                             "+video.enabled=false", "n=3", "video.format=gif"]


def test_options_fill_the_defaults_under_what_was_given_and_take_a_python_callers_bare_bool():
    assert keys.options({"load": "runs/a", "video": True}, None) == {**keys.VIDEO_DEFAULTS, "enabled": True}
    assert keys.options({"load": "runs/a"}, None) == keys.VIDEO_DEFAULTS
    got = keys.options({"load": "runs/a", "video": {"enabled": True, "episodes": 5}}, ["video=true"])
    assert (got["enabled"], got["episodes"], got["fps"]) == (True, 5, keys.VIDEO_DEFAULTS["fps"])


def test_video_keys_without_load_and_video_keys_without_video_are_refused():
    with pytest.raises(ConfigError, match="need load=RUN_DIR"):
        keys.options({"load": None, "video": {"enabled": False}}, ["video.episodes=2"])
    with pytest.raises(ConfigError, match="need load=RUN_DIR"):
        keys.options({"load": None, "video": {"enabled": True}}, None)
    with pytest.raises(ConfigError, match="need load=RUN_DIR"):
        keys.options({"video": True}, None)
    assert keys.options({"load": "runs/a", "video": {"enabled": True}}, ["video.enabled=true"])["enabled"] is True
    assert keys.options({"load": None, "video": {"enabled": False}}, ["n=3"])["enabled"] is False
    with pytest.raises(ConfigError, match="video.episodes is given but video is off"):
        keys.options({"load": "a", "video": None}, ["load=a", "video.episodes=2"])
    assert keys.options({"load": "a", "video": {"enabled": True}}, ["load=a", "video.enabled=true",
                                                                     "video.episodes=2"])["enabled"] is True
