"""docs/configuration.md is generated from the code (scripts/config_reference.py) and kept in step."""

import pytest
from conftest import load_script, unload_script

from her_rl.config.registry import ALGOS, ENVS
from her_rl.config.checks import ENV_GROUP, TOP, algo_rules


@pytest.fixture(scope="module")
def ref():
    yield load_script("config_reference")
    unload_script("config_reference")


@pytest.fixture(scope="module")
def page(ref):
    return ref.render()


def test_committed_page_is_the_generated_one(ref, page):
    committed = ref.PAGE.read_text(encoding="utf-8") if ref.PAGE.exists() else ""
    assert committed == page, f"docs/configuration.md is out of date: run `{ref.COMMAND}` and commit it"


def test_check_flag_reports_a_stale_page(ref, page, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ref, "render", lambda: page)
    stale = tmp_path / "configuration.md"
    stale.write_text("# old\n", encoding="utf-8")
    assert ref.main(["--check", "--out", str(stale)]) == 1
    assert ref.COMMAND in capsys.readouterr().err
    assert ref.main(["--out", str(stale)]) == 0
    assert ref.main(["--check", "--out", str(stale)]) == 0


def _leaves(rules, prefix=""):
    for key, rule in rules.items():
        if isinstance(rule, dict):
            yield from _leaves(rule, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", rule


def _row(page, section_anchor, key):
    """The table row of `key` in the section that starts at `{#section_anchor}`."""
    section = page.split(f"{{#{section_anchor}}}", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith(f"| `{key}` |")]
    assert len(rows) == 1, f"{key}: {len(rows)} rows in section {section_anchor}"
    return [c.strip() for c in rows[0].strip("|").split(" | ")]


def test_every_top_level_key_has_its_rule(page):
    for key, rule in _leaves(TOP):
        assert _row(page, "top", key)[2] == rule.allowed.replace("|", "\\|"), key


def test_every_algo_key_has_default_rule_and_meaning(ref, page):
    from omegaconf import OmegaConf

    from her_rl.config.compose import compose

    for name in ALGOS:
        cfg = OmegaConf.to_container(compose([f"algo={name}", "~tuned"]).algo, resolve=False)
        for key, rule in algo_rules(name).items():
            _, default, allowed, meaning = _row(page, f"algo-{name}", key)
            assert allowed == rule.allowed.replace("|", "\\|"), (name, key)
            assert meaning, f"algo.{key} of {name} has no meaning on its field"
            assert default == f"`{ref.show(cfg[key])}`", (name, key)


def test_env_keys_and_kwargs_are_documented(page):
    for key, rule in ENV_GROUP.items():
        row = _row(page, "env", f"env.{key}")
        assert row[1] == rule.allowed.replace("|", "\\|") and row[2], key
    for name in ENVS:
        assert f"| `{name}` |" in page, name
    for name in ("bitflip", "deep_sea", "push", "drag"):  # the envs with settings of their own
        section = page.split(f"{{#env-{name}}}", 1)[1].split("\n##", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| `env.kwargs.")]
        assert rows and all(not line.rstrip().endswith("|  |") for line in rows), name


def test_yaml_comments_nest_continue_and_read_defaults_lists(ref):
    text = (
        "# header\n"
        "defaults:\n"
        "  - algo: her_dqn     # the algorithm\n"
        "  - optional tuned: ${algo}_${env}   # per pair\n"
        "  - override hydra/job_logging: none  # not a key of ours\n"
        "top: 1          # first line\n"
        "                # second line\n"
        "# a section comment, not a continuation\n"
        "group:\n"
        "  leaf: 'a # b'   # quoted hash\n"
        "  bare: 2\n"
        "after: 3\n"
    )
    keys = ref.yaml_keys(text)
    assert keys["algo"] == ("her_dqn", "the algorithm")
    assert keys["tuned"] == ("${algo}_${env}", "per pair")
    assert not any("hydra" in k for k in keys)
    assert keys["top"] == ("1", "first line second line")
    assert keys["group.leaf"] == ("'a # b'", "quoted hash")
    assert keys["group.bare"] == ("2", "")
    assert keys["after"] == ("3", "")


def test_a_changed_comment_changes_the_page(ref, monkeypatch, tmp_path):
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(ref.CONF, conf)
    env = conf / "env" / "deep_sea.yaml"
    text = env.read_text(encoding="utf-8")
    env.write_text(text.replace("# fixes which action", "# the task's seed: it fixes which action"), encoding="utf-8")
    monkeypatch.setattr(ref, "CONF", conf)
    assert _row(ref.render(), "env-deep_sea", "env.kwargs.mapping_seed")[3].startswith("the task's seed: it fixes")


def test_a_changed_field_meaning_changes_the_page(ref, monkeypatch):
    import copy
    from types import MappingProxyType

    from her_rl.algos.hindsight import HindsightLearner

    changed = copy.copy(HindsightLearner.__dataclass_fields__["gamma"])
    changed.metadata = MappingProxyType({**changed.metadata, "doc": "how much later rewards count"})
    monkeypatch.setitem(HindsightLearner.__dataclass_fields__, "gamma", changed)
    assert _row(ref.render(), "algo-her_dqn", "gamma")[1:] == ["`0.98`", "a number in (0, 1]", "how much later rewards count"]
