"""scripts/bench_her.py: table, censored-median and ratio helpers on fabricated rows (no training)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_script, unload_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_her.py"


@pytest.fixture(scope="module")
def bench():
    yield load_script("bench_her")
    unload_script("bench_her")


def test_importable_without_sb3():
    # SB3 is a bench-only extra: the helpers must work with stable_baselines3 unimportable
    code = (
        "import sys, importlib.util; sys.modules['stable_baselines3'] = None\n"
        f"spec = importlib.util.spec_from_file_location('bench_her', {str(SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['bench_her'] = m; spec.loader.exec_module(m)\n"
        "print(m.format_table([m.Row('ours', 0, True, 10, 1.0)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "| ours | 0 | yes | 10 | 1.0 |" in out.stdout


def test_censored_median(bench):
    med = bench.censored_median
    assert med([3.0, 1.0, 2.0], [False] * 3) == bench.Stat(2.0, "")
    assert med([4.0, 1.0, 2.0, 3.0], [False] * 4) == bench.Stat(2.5, "")
    # a censored value above the middle does not move the median
    assert med([1.0, 2.0, 9.0], [False, False, True]) == bench.Stat(2.0, "")
    # at or below the middle it does: the median is only a lower bound
    assert med([1.0, 5.0, 9.0], [False, True, False]) == bench.Stat(5.0, ">")
    assert med([1.0, 2.0, 3.0, 9.0], [False, False, False, True]) == bench.Stat(2.5, "")
    assert med([1.0, 2.0, 3.0, 9.0], [False, False, True, False]).bound == ">"
    assert med([1.0, 2.0, 3.0, 9.0, 10.0], [False, False, False, True, True]).bound == ""
    assert med([], []).value is None


def test_ratio_bounds(bench):
    S, ratio = bench.Stat, bench.ratio
    assert ratio(S(2.0), S(4.0)) == S(0.5, "")
    assert ratio(S(2.0), S(4.0, ">")) == S(0.5, "<")   # SB3 did not solve: ours/SB3 is at most this
    assert ratio(S(8.0, ">"), S(4.0)) == S(2.0, ">")   # ours did not solve: at least this
    assert ratio(S(8.0, ">"), S(4.0, ">")).value is None
    assert ratio(S(None), S(4.0)).value is None
    assert ratio(S(1.0), S(0.0)).value is None
    assert S(0.5, "<").fmt(2) == "<0.50" and S(None).fmt() == "n/a" and S(12345.0).fmt() == "12,345"


def test_table_all_solved(bench):
    R = bench.Row
    rows = [R("ours", 0, True, 10_000, 20.0), R("sb3", 0, True, 50_000, 200.0),
            R("ours", 1, True, 12_000, 30.0), R("sb3", 1, True, 40_000, 150.0),
            R("ours", 2, True, 14_000, 40.0), R("sb3", 2, True, 60_000, 250.0)]
    table = bench.format_table(rows, n=30)
    lines = table.splitlines()
    assert "n=30" in lines[0]
    assert "| side | seed | solved | env steps to success | wall s to success |" in lines
    assert "| ours | 1 | yes | 12,000 | 30.0 |" in lines
    assert "| **ours median** | | 3/3 | 12,000 | 30.0 |" in lines
    assert "| **sb3 median** | | 3/3 | 50,000 | 200.0 |" in lines
    assert "| **ours / sb3** | | | 0.24x | 0.15x |" in lines
    assert "cap" not in table


def test_table_sb3_unsolved_is_a_bound(bench):
    R = bench.Row
    rows = [R("ours", 0, True, 10_000, 20.0), R("sb3", 0, False, 90_000, 400.5),
            R("ours", 1, True, 12_000, 30.0), R("sb3", 1, True, 50_000, 228.0),
            R("ours", 2, True, 14_000, 40.0), R("sb3", 2, False, 88_000, 400.2)]
    lines = bench.format_table(rows).splitlines()
    assert "| sb3 | 0 | no | >90,000 (cap) | >400.5 (cap) |" in lines
    assert "| **sb3 median** | | 1/3 | >88,000 | >400.2 |" in lines
    # ratio against the cap, marked as an upper bound on ours/SB3
    assert "| **ours / sb3** | | | <0.14x | <0.07x |" in lines
    assert any("lower bound" in line for line in lines)


def test_table_single_side_has_no_ratio(bench):
    rows = [bench.Row("ours", 0, True, 2_000, 3.0)]
    table = bench.format_table(rows)
    assert "| **ours median** | | 1/1 | 2,000 | 3.0 |" in table
    assert "ours / sb3" not in table


def test_cli_defaults_and_json(bench, tmp_path):
    args = bench.parse_args([])
    assert (args.n, args.seeds, args.max_steps, args.sb3_max_seconds, args.only, args.threads, args.eval_every) == (
        [15, 20, 30, 50], [0, 1, 2], 150_000, 400.0, "both", 1, 1_000)
    args = bench.parse_args(["--n", "8", "--seeds", "0", "--only", "sb3", "--json", str(tmp_path / "r.json")])
    bench._write_json(args, [bench.Row("sb3", 0, True, 2_000, 5.9)])
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["settings"]["n"] == [8] and data["settings"]["only"] == "sb3"
    assert data["rows"] == [{"side": "sb3", "seed": 0, "solved": True, "env_steps": 2000, "wall_s": 5.9, "n": 0}]


def test_sb3_side_smoke_is_skipped_without_sb3():
    # SB3 is a bench-only extra: nothing here trains it; just check it is importable when installed.
    sb3 = pytest.importorskip("stable_baselines3")
    assert hasattr(sb3, "HerReplayBuffer")


def test_summary_has_one_line_per_n_with_ratios(bench):
    R = bench.Row
    rows = [R("ours", 0, True, 6_000, 3.0, 20), R("sb3", 0, True, 8_000, 12.0, 20),
            R("ours", 0, True, 40_000, 20.0, 30), R("sb3", 0, False, 90_000, 400.0, 30)]
    table = bench.format_summary(rows).splitlines()
    assert len(table) == 4
    assert table[2] == "| 20 | 1/1 | 6,000 | 1/1 | 8,000 | 0.75 | 3.0 | 12.0 | 0.250 |"
    assert table[3].startswith("| 30 | 1/1 | 40,000 | 0/1 | >90,000 | <0.44 |")
