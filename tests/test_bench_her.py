"""scripts/bench_her.py over bench.bitflip: the tables, the censored medians and ratios, a
tiny run of ours against a stand-in peer written to JSON, and SB3 only when it is installed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_script, unload_script

from bench import Row, Stat, bitflip, censored_median, peers, ratio

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_her.py"


@pytest.fixture(scope="module")
def bench():
    yield load_script("bench_her")
    unload_script("bench_her")


def test_without_sb3_the_tables_work_and_the_script_says_so_in_one_line():
    # SB3 is a bench-only extra: the tables work with stable_baselines3 unimportable, a run that needs it stops
    code = (
        "import sys, importlib.util; sys.modules['stable_baselines3'] = None\n"
        "from bench import Row, bitflip\n"
        "print(bitflip.format_table([Row('ours', 0, True, 10, 1.0)]))\n"
        f"spec = importlib.util.spec_from_file_location('bench_her', {str(SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['bench_her'] = m; spec.loader.exec_module(m)\n"
        "m.main(['--n', '4', '--only', 'sb3'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "| ours | 0 | yes | 10 | 1.0 |" in out.stdout
    assert ": error: stable-baselines3 is not installed" in out.stderr.strip().splitlines()[-1]
    assert "Traceback" not in out.stderr


def test_censored_median():
    med = censored_median
    assert med([3.0, 1.0, 2.0], [False] * 3) == Stat(2.0, "")
    assert med([4.0, 1.0, 2.0, 3.0], [False] * 4) == Stat(2.5, "")
    # a censored value above the middle does not move the median
    assert med([1.0, 2.0, 9.0], [False, False, True]) == Stat(2.0, "")
    # at or below the middle it does: the median is only a lower bound
    assert med([1.0, 5.0, 9.0], [False, True, False]) == Stat(5.0, ">")
    assert med([1.0, 2.0, 3.0, 9.0], [False, False, False, True]) == Stat(2.5, "")
    assert med([1.0, 2.0, 3.0, 9.0], [False, False, True, False]).bound == ">"
    assert med([1.0, 2.0, 3.0, 9.0, 10.0], [False, False, False, True, True]).bound == ""
    assert med([], []).value is None


def test_ratio_bounds():
    S = Stat
    assert ratio(S(2.0), S(4.0)) == S(0.5, "")
    assert ratio(S(2.0), S(4.0, ">")) == S(0.5, "<")   # SB3 did not solve: ours/SB3 is at most this
    assert ratio(S(8.0, ">"), S(4.0)) == S(2.0, ">")   # ours did not solve: at least this
    assert ratio(S(8.0, ">"), S(4.0, ">")).value is None
    assert ratio(S(None), S(4.0)).value is None
    assert ratio(S(1.0), S(0.0)).value is None
    assert S(0.5, "<").fmt(2) == "<0.50" and S(None).fmt() == "n/a" and S(12345.0).fmt() == "12,345"


def test_table_all_solved():
    rows = [Row("ours", 0, True, 10_000, 20.0), Row("sb3", 0, True, 50_000, 200.0),
            Row("ours", 1, True, 12_000, 30.0), Row("sb3", 1, True, 40_000, 150.0),
            Row("ours", 2, True, 14_000, 40.0), Row("sb3", 2, True, 60_000, 250.0)]
    table = bitflip.format_table(rows, n=30)
    lines = table.splitlines()
    assert "n=30" in lines[0]
    assert "| side | seed | solved | env steps to success | wall s to success |" in lines
    assert "|---|---:|:---:|---:|---:|" in lines
    assert "| ours | 1 | yes | 12,000 | 30.0 |" in lines
    assert "| **ours median** | | 3/3 | 12,000 | 30.0 |" in lines
    assert "| **sb3 median** | | 3/3 | 50,000 | 200.0 |" in lines
    assert "| **ours / sb3** | | | 0.24x | 0.15x |" in lines
    assert "cap" not in table


def test_table_sb3_unsolved_is_a_bound():
    rows = [Row("ours", 0, True, 10_000, 20.0), Row("sb3", 0, False, 90_000, 400.5),
            Row("ours", 1, True, 12_000, 30.0), Row("sb3", 1, True, 50_000, 228.0),
            Row("ours", 2, True, 14_000, 40.0), Row("sb3", 2, False, 88_000, 400.2)]
    lines = bitflip.format_table(rows).splitlines()
    assert "| sb3 | 0 | no | >90,000 (cap) | >400.5 (cap) |" in lines
    assert "| **sb3 median** | | 1/3 | >88,000 | >400.2 |" in lines
    # ratio against the cap, marked as an upper bound on ours/SB3
    assert "| **ours / sb3** | | | <0.14x | <0.07x |" in lines
    assert any("lower bound" in line for line in lines)


def test_table_single_side_has_no_ratio():
    table = bitflip.format_table([Row("ours", 0, True, 2_000, 3.0)])
    assert "| **ours median** | | 1/1 | 2,000 | 3.0 |" in table
    assert "ours / sb3" not in table


def test_summary_has_one_line_per_n_with_ratios():
    rows = [Row("ours", 0, True, 6_000, 3.0, 20), Row("sb3", 0, True, 8_000, 12.0, 20),
            Row("ours", 0, True, 40_000, 20.0, 30), Row("sb3", 0, False, 90_000, 400.0, 30)]
    table = bitflip.format_summary(rows).splitlines()
    assert len(table) == 4
    assert table[2] == "| 20 | 1/1 | 6,000 | 1/1 | 8,000 | 0.75 | 3.0 | 12.0 | 0.250 |"
    assert table[3].startswith("| 30 | 1/1 | 40,000 | 0/1 | >90,000 | <0.44 |")


def test_cli_defaults(bench):
    args = bench.parse_args([])
    assert (args.n, args.seeds, args.max_steps, args.sb3_max_seconds, args.only, args.threads, args.eval_every) == (
        [15, 20, 30, 50], [0, 1, 2], 150_000, 400.0, "both", 1, 1_000)


def test_a_tiny_run_of_ours_against_a_stand_in_peer_writes_its_rows(bench, tmp_path, monkeypatch, capsys):
    asked = []

    def stand_in(n, seed, protocol, threads, exploration_fraction, episodes):
        asked.append((n, seed, protocol, exploration_fraction, episodes))
        return peers.PeerRun([(200, 0.5, 0.2), (400, 1.5, 0.97)], 450, 1.7)

    monkeypatch.setattr(peers, "missing", lambda: None)
    monkeypatch.setattr(peers, "dqn_her_bitflip", stand_in)
    out = tmp_path / "r.json"
    assert bench.main(["--n", "4", "--seeds", "0", "--eval-every", "200", "--max-steps", "3000",
                       "--ours-override", "budget.env_steps=1000", "--json", str(out)]) == 0
    assert asked == [(4, 0, peers.Protocol(200, 3000, 0.95, 400.0), 0.1, 100)]
    data = json.loads(out.read_text())
    assert data["settings"]["n"] == [4] and data["settings"]["eval_episodes"] == 100
    ours, sb3 = data["rows"]
    assert sb3 == {"side": "sb3", "seed": 0, "solved": True, "env_steps": 400, "wall_s": 1.5, "n": 4}
    assert ours["side"] == "ours" and ours["n"] == 4 and 0 < ours["env_steps"] <= 1000 + 64
    printed = capsys.readouterr().out
    assert "| sb3 | 0 | yes | 400 | 1.5 |" in printed
    assert "**ours / sb3**" in printed and printed.splitlines()[-1].startswith("| 4 |")


def test_an_unsolved_peer_reports_where_its_cap_stopped_it(monkeypatch):
    monkeypatch.setattr(peers, "dqn_her_bitflip", lambda *a: peers.PeerRun([(200, 0.5, 0.2)], 333, 7.5))
    assert bitflip.run_sb3(8, 1, 1, 3000, 5.0, eval_every=200) == Row("sb3", 1, False, 333, 7.5, 8)
