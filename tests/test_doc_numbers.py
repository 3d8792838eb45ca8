"""Every number of the README's results table and the sweeps page's example summary is what its command
gave: the README's table is the one scripts/readme_runs.py makes from its record, and the short
commands run again here give the same env steps and results on the CPU model that made the record
(float arithmetic differs between CPU models, so elsewhere only solved / not solved is compared)."""

import json
import re
import sys
from pathlib import Path

import forked
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import readme_runs  # noqa: E402

RECORD = json.loads(readme_runs.RECORD.read_text())["rows"]
SAME_CPU = all((row["cpu"], row["cpu_flags"]) == (readme_runs.cpu_model(), readme_runs.cpu_flags()) for row in RECORD)
SHORT = ("her-run n=15",)  # the line short enough to run here (seconds)


def test_the_readme_table_is_the_record_of_its_commands():
    readme = readme_runs.README.read_text()
    lines = readme_runs.training_lines(readme)
    assert [row["command"] for row in RECORD] == lines  # every training line has its measured row
    assert readme_runs.table(RECORD) in readme
    assert len({row["cpu"] for row in RECORD}) == 1 and f"`{RECORD[0]['cpu']}`" in readme  # the CPU is named


@pytest.mark.parametrize("command", SHORT)
def test_a_short_readme_line_gives_its_recorded_result(command, tmp_path, her_run):
    row = next(r for r in RECORD if r["command"] == command)
    done = forked.run([her_run, *command.split()[1:], "progress=false", f"hydra.run.dir={tmp_path / 'run'}"],
                      cwd=tmp_path, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["solved"] == row["solved"]
    if SAME_CPU:
        assert (results["env_steps"], results[row["metric"]]) == (row["env_steps"], row["value"])


def test_the_sweeps_page_example_is_what_its_command_prints(tmp_path, her_run):
    page = (ROOT / "docs" / "sweeps.md").read_text()
    shown = re.search(r"```text\n(\| setting \|.*?)```", page, re.S).group(1).splitlines()
    done = forked.run([her_run, "-m", "n=3,4", "seed=0,1", "hydra.sweep.dir=sw"], cwd=tmp_path, text=True,
                      timeout=300)
    assert done.returncode == 0, done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith(("|", "wrote", "4 runs"))]

    def numbers(lines):  # the seconds column (last) depends on the machine's load
        return [line.rsplit("|", 2)[0] if line.startswith("| n=") else line for line in lines]

    assert len(printed) == len(shown)
    if SAME_CPU:
        assert numbers(printed) == numbers(shown)
    else:
        assert [line.split("|")[1:7] for line in printed if line.startswith("| n=")] == \
            [line.split("|")[1:7] for line in shown if line.startswith("| n=")]  # settings, seeds, done, solved
