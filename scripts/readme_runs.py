"""The README's quick-start training lines, run as written: their results as the README's table shows them.

    .venv/bin/python scripts/readme_runs.py --json docs/bench/readme_runs.json    # run every line (minutes)
    .venv/bin/python scripts/readme_runs.py --only "her-run n=15" --json docs/bench/readme_runs.json
    .venv/bin/python scripts/readme_runs.py --table                               # README's table from the JSON

Each training line of the README's first bash block (not the load, resume and folder lines) runs once in a
folder of its own under a temporary folder; a row keeps the command, what results.json says (solved, the
metric, env steps) and the command's wall seconds, with the CPU that ran it. ``--table`` rewrites the
table under "| command | end |" in README.md from the rows, so every number there is one a command gave
(tests/test_doc_numbers.py holds the README to the JSON and reruns the short lines).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench/ lies beside the package

from bench.rows import cpu_flags, cpu_model  # noqa: E402

README = ROOT / "README.md"
RECORD = ROOT / "docs" / "bench" / "readme_runs.json"
HEADER = "| command | end | env steps | seconds |"


def training_lines(readme: str) -> list[str]:
    """The her-run lines of the first bash block with her-run lines that train a new run (no load=, resume=, run folder)."""
    block = next(b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if "her-run " in b)
    lines = []
    for line in block.splitlines():
        tokens = shlex.split(line, comments=True)
        if tokens[:1] == ["her-run"] and not any(t.startswith(("load=", "resume=", "hydra.run.dir=")) for t in tokens):
            lines.append(shlex.join(tokens))
    return lines


def run(command: str, folder: Path, her_run: str) -> dict:
    tokens = shlex.split(command)
    start = time.perf_counter()
    done = subprocess.run([her_run, *tokens[1:], "progress=false", f"hydra.run.dir={folder}"], capture_output=True,
                          text=True, cwd=folder.parent)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    results = json.loads((folder / "results.json").read_text())
    goal = "eval_success_rate" in results
    return {"command": command, "solved": bool(results["solved"]), "env_steps": int(results["env_steps"]),
            "metric": "eval_success_rate" if goal else "eval_return",
            "value": results["eval_success_rate" if goal else "eval_return"], "seconds": round(seconds, 1),
            "cpu": cpu_model(), "cpu_flags": cpu_flags()}


def end_text(row: dict) -> str:
    from her_rl.run.results import shown

    status = "solved" if row["solved"] else "budget spent"
    what = "greedy success" if row["metric"] == "eval_success_rate" else "mean greedy return"
    return f"{status}, {what} {shown(row['value'])}"


def table(rows: list[dict]) -> str:
    lines = [HEADER, "|---|---|---:|---:|"]
    lines += [f"| `{r['command']}` | {end_text(r)} | {r['env_steps']:,} | {r['seconds']:.0f} |" for r in rows]
    return "\n".join(lines) + "\n"


def rewrite_readme(rows: list[dict]) -> None:
    text = README.read_text()
    start = text.index(HEADER)
    end = text.index("\n\n", start) + 1
    README.write_text(text[:start] + table(rows) + text[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="record the rows here (rows of other commands are kept)")
    parser.add_argument("--only", nargs="+", help="run only these lines (as written in the README)")
    parser.add_argument("--table", action="store_true", help="rewrite README's table from --json (or the record)")
    args = parser.parse_args(argv)
    record = args.json or RECORD
    lines = training_lines(README.read_text())
    if args.table:
        rows = json.loads(record.read_text())["rows"]
        rewrite_readme(sorted(rows, key=lambda r: lines.index(r["command"])))
        return 0
    her_run = str(Path(sys.executable).with_name("her-run"))
    rows = json.loads(record.read_text())["rows"] if record.exists() else []
    with tempfile.TemporaryDirectory(prefix="her-readme-") as root:
        for i, command in enumerate(c for c in lines if not args.only or c in args.only):
            row = run(command, Path(root) / f"run-{i}", her_run)
            rows = [r for r in rows if r["command"] != command] + [row]
            print(json.dumps(row), flush=True)
            record.write_text(json.dumps({"rows": sorted(rows, key=lambda r: lines.index(r["command"]))},
                                         indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
