"""The env families page's results: its table and curves are what its JSON rows say."""

import json
from pathlib import Path

import pytest

from bench.families import replace_section, section, table, to_level

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "env-families.md"
ROWS = ROOT / "docs" / "bench" / "families_defaults.json"
PNG = "assets/env_families.png"


def _row(seed, evals, solved=None, cap=None, task="PandaPush-v3"):
    return {"task": task, "family": "panda-gym", "seed": seed, "command": f"her-run env=gym env.id={task} seed={seed}",
            "algo": "her_crossq", "cap": cap, "env_steps": evals[-1][0], "solved_at_env_steps": solved,
            "success": evals[-1][1], "best": max(e[1] for e in evals), "train_wall_s": 100.0 * (seed + 1),
            "evals": [[s, v, v] for s, v in evals], "cpu": "a CPU", "note": "beside a test"}


def test_the_page_is_generated_from_its_rows():
    rows = json.loads(ROWS.read_text())["rows"]
    page = PAGE.read_text()
    assert replace_section(page, rows, PNG) == page, "regenerate: python scripts/bench_families.py --page " \
        "docs/env-families.md --png docs/assets/env_families.png"
    assert (ROOT / "docs" / PNG).is_file()
    for row in rows:  # every row is the command with nothing but the id and the seed
        assert row["command"] == f"her-run env=gym env.id={row['task']} seed={row['seed']}"
        assert row["evals"] and row["success"] == row["evals"][-1][1]


def test_the_table_gives_each_seed_its_steps_to_each_level_and_the_iqm_over_three():
    rows = [_row(0, [(10_000, 0.2), (20_000, 0.6), (30_000, 0.92)], solved=30_000),
            _row(1, [(10_000, 0.1), (20_000, 0.3)], cap=20_000),
            _row(2, [(10_000, 0.5), (20_000, 0.95)], solved=20_000)]
    assert [to_level(r, 0.5) for r in rows] == [20_000, None, 10_000]
    text = table(rows)
    line = text.splitlines()[2]
    assert "`PandaPush-v3` | her_crossq | 0, 1, 2 |" in line
    assert "30,000 (solved) / 20,000 (stopped there) / 20,000 (solved)" in line
    assert "20,000 / not by 20,000 / 10,000" in line and "30,000 / not by 20,000 / 20,000" in line
    assert "0.92 (IQM 0.72 [0.30, 0.95])" in line  # median of 0.92, 0.30, 0.95; IQM of three: their mean
    assert "100 / 200 / 300" in line
    one = table([_row(0, [(10_000, 0.4)], task="FetchReach-v4")]).splitlines()[2]
    assert "| 0.40 |" in one and "IQM" not in one
    assert "- `PandaPush-v3`: a CPU; beside a test" in section(rows, None)
    # where the seeds ran differently, each seed's line is named, in seed order
    apart = [_row(1, [(10_000, 0.4)]), {**_row(0, [(10_000, 0.5)]), "note": "alone"}]
    assert "- `PandaPush-v3`: seed 0: a CPU; alone | seed 1: a CPU; beside a test" in section(apart, None)


def _folder(path, config, rows):
    path.mkdir()
    (path / "config.yaml").write_text(config)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_same_run_compares_configs_and_rows_with_time_aside(tmp_path):
    from bench.families import same_run

    rows = [{"step": 100 * i, "wall_time": 5.0 + i, "charts/SPS": 90.0, "losses/qf_loss": 1.0 / (i + 1)} for i in range(5)]
    made = _folder(tmp_path / "made", "seed: 0\nresume: true\nprogress: true\nalgo:\n  gamma: 0.95\n", rows)
    timed = [{**r, "wall_time": 99.0, "charts/SPS": 10.0} for r in rows[:3]]
    plain = _folder(tmp_path / "plain", "seed: 0\nresume: false\nprogress: false\nalgo:\n  gamma: 0.95\n", timed)
    assert same_run(made, plain) == ([], 3, None)
    other = _folder(tmp_path / "other", "seed: 0\nalgo:\n  gamma: 0.98\n  n_step: 3\n",
                    [timed[0], {**timed[1], "losses/qf_loss": 0.4}, timed[2]])
    assert same_run(made, other) == (["algo.gamma", "algo.n_step"], 1, 100)
