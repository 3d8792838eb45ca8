"""The TensorBoard tag table of docs/usage.md is generated from short runs (scripts/tb_tags.py) and kept
in step with what the algorithms log."""

import json
import re
from pathlib import Path

import pytest
from conftest import load_script, unload_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tb():
    yield load_script("tb_tags")
    unload_script("tb_tags")


@pytest.fixture(scope="module")
def runs(tb, tmp_path_factory):
    """(folder of the runs, probe -> scalar tags), one short run per probe (about 15 s in all)."""
    folder = tmp_path_factory.mktemp("tb_tags")
    return folder, tb.collect(folder)


def _table_tags(text: str) -> set[str]:
    return set(re.findall(r"^\| `([\w/]+)` \|", text, flags=re.M))


def test_committed_table_is_the_generated_one(tb, runs):
    committed = tb.PAGE.read_text(encoding="utf-8")
    assert tb.render(committed, runs[1]) == committed, \
        f"the TensorBoard tag table of docs/usage.md is out of date: run `{tb.COMMAND}` and commit it"


def test_check_flag_reports_a_stale_table(tb, runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tb, "collect", lambda folder=None: runs[1])
    stale = tmp_path / "usage.md"
    stale.write_text(f"# Usage\n\nbefore\n\n<!-- tb-tags -->\n| `charts/old` |\n{tb.END}\n\nafter\n", encoding="utf-8")
    assert tb.main(["--check", "--out", str(stale)]) == 1
    assert tb.COMMAND in capsys.readouterr().err
    assert tb.main(["--out", str(stale)]) == 0
    text = stale.read_text(encoding="utf-8")
    assert text.startswith("# Usage\n\nbefore\n\n") and text.endswith(f"{tb.END}\n\nafter\n")
    assert "charts/old" not in text and "`losses/alpha_loss`" in text
    assert tb.main(["--check", "--out", str(stale)]) == 0


def test_tags_without_a_meaning_stop_the_script(tb, runs):
    tags = dict(runs[1])
    probe = next(iter(tags))
    tags[probe] = tags[probe] | {"losses/new_thing"}
    with pytest.raises(SystemExit, match="losses/new_thing"):
        tb.render_block(tags)


def test_sac_redq_and_reinforce_switches_and_success_tags(tb, runs):
    """SAC's and REDQ's own tags, the keys that switch tags, and the success tags, as the runs show them."""
    table, success_only = tb.cells(runs[1])
    for tag in ("losses/qf_loss", "losses/actor_loss", "losses/alpha", "losses/entropy", "losses/q_values"):
        assert table[tag]["her_sac"] == table[tag]["her_redq"] == "✓", tag
    assert table["losses/alpha_loss"]["her_sac"] == "✓ (not with `algo.autotune=false`)"
    assert table["losses/value_loss"]["reinforce"] == "with `algo.baseline=critic`"
    assert {"charts/success_rate", "eval/success_rate", "eval/any_success_rate",
            "hparams/eval_success_rate"} <= success_only
    assert not any(t.startswith("losses/") for t in success_only)
    cartpole = [tags for p, tags in runs[1].items() if "env=cartpole" in p.overrides]
    assert cartpole and not any("success" in t for tags in cartpole for t in tags)


def test_metrics_jsonl_holds_the_same_scalars_but_hparams(tb, runs):
    folder, tags = runs
    for i, probe in enumerate(tb.probes()):
        keys = set()
        for line in (folder / f"run-{i}" / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
            keys |= set(json.loads(line))
        assert keys - {"step", "wall_time"} == {t for t in tags[probe] if not t.startswith("hparams/")}, probe


def test_every_tag_the_code_names_is_in_the_table(tb):
    """A tag written as a literal anywhere in her_rl (also on a code path the short runs miss)."""
    page = _table_tags(tb.PAGE.read_text(encoding="utf-8"))
    named = set()
    for path in (ROOT / "her_rl").rglob("*.py"):
        named |= set(re.findall(r"[\"'`]((?:charts|losses|eval|hparams)/\w+)[\"'`]", path.read_text(encoding="utf-8")))
    assert named, "no tag found in her_rl"
    assert not named - page, f"tags in her_rl that the table of docs/usage.md lacks: {sorted(named - page)}"


def _tells_success(name: str) -> bool:
    """Whether env group `name`'s env carries a success key in its step info (all built-in goal envs do)."""
    from omegaconf import OmegaConf

    from her_rl.envs import make_vec
    from her_rl.rl.success import SUCCESS_KEYS
    from her_rl.config.compose import compose

    cfg = OmegaConf.to_container(compose([f"env={name}"]).env, resolve=True)
    envs = make_vec(cfg, 1, seed=0)
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        info = envs.step(envs.action_space.sample())[4]
    finally:
        envs.close()
    return any(key in info for key in SUCCESS_KEYS)


def test_the_page_says_which_built_in_envs_tell_success(tb):
    from her_rl.config.registry import ENVS

    text = " ".join(tb.PAGE.read_text(encoding="utf-8").split())
    sentence = re.search(r"Of the built-in envs, (.*?) tell success; (.*?) do not", text)
    assert sentence, "docs/usage.md no longer says which built-in envs tell success"

    def names(part):
        found = set()
        for word in re.findall(r"`([\w*]+)`", part):
            found |= {e for e in ENVS if e.startswith(word[:-1])} if word.endswith("*") else {word}
        return found

    told, untold = names(sentence[1]), names(sentence[2])
    assert told | untold == set(ENVS) - {"gym"} and not told & untold
    for name in sorted(told | untold):
        if name.startswith("fetch_"):
            pytest.importorskip("gymnasium_robotics")
        assert _tells_success(name) == (name in told), name
