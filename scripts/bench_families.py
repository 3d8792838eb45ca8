"""The standard goal tasks by their own ids, each run as a user would type it: ``her-run env=gym env.id=ID``.

    .venv/bin/python scripts/bench_families.py --tasks PandaPush-v3 --seeds 0 1 2 --json docs/bench/families_defaults.json
    .venv/bin/python scripts/bench_families.py --tasks FetchSlide-v4 --cap 300000 --json ...   # stopped at 300,000
    .venv/bin/python scripts/bench_families.py --record RUN_FOLDER --tasks PandaPush-v3 --seeds 0 --json ...
    .venv/bin/python scripts/bench_families.py --page docs/env-families.md --png docs/assets/env_families.png
    .venv/bin/python scripts/bench_families.py --same-as RUN_FOLDER --tasks PandaPickAndPlace-v3 --seeds 0 --seconds 150

Each run is ``her-run env=gym env.id=ID seed=S`` in a fresh folder (``--cap N`` adds ``budget.env_steps=N``:
the same run, stopped there); its row (bench/families.py) is added to ``--json`` as soon as it ends, a row
of the same task and seed replaced. ``--record`` makes the row of a run folder made by that command (a
run stopped by hand ends at its last evaluation). ``--page`` regenerates the page's results section and
curves from the JSON. ``--same-as`` checks that a run started with keys a tuned file now sets is the plain
command's run: it runs the plain command for ``--seconds`` (then stops it as a signal would) and compares
the configs and the metrics rows, wall time and SPS aside (exit 1 where they differ). Needs the robotics,
panda and bench extras.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.families import plot, replace_section, run_row, same_run  # noqa: E402
from bench.rows import cpu_model  # noqa: E402

DEFAULT_JSON = HERE.parent / "docs" / "bench" / "families_defaults.json"
# SB3's bit-flipping env, registered from a user module as a user would (her-rl's own module is
# not involved): n=15 bits, an episode of 15 steps.
SB3_BITFLIP = '''import gymnasium as gym
gym.register(id="SB3BitFlip-v0", entry_point="stable_baselines3.common.envs:BitFlippingEnv",
             kwargs={"n_bits": 15, "max_steps": 15}, max_episode_steps=15)
'''


def family(task: str) -> str:
    from her_rl.envs.families import family_of

    found = family_of(task)
    return found.name if found else "Stable-Baselines3 (a user module)" if task.startswith("sb3_") else "your own"


def run_task(task: str, seed: int, cap: int | None, note: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "run"
        Path(tmp, "sb3_bitflip.py").write_text(SB3_BITFLIP)
        args = ["env=gym", f"env.id={task}", f"seed={seed}", *([f"budget.env_steps={cap}"] if cap else []),
                "progress=false", f"hydra.run.dir={folder}"]
        started = time.monotonic()
        done = subprocess.run([str(Path(sys.executable).with_name("her-run")), *args], cwd=tmp, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise SystemExit(f"{task}: her-run exited {done.returncode}: {done.stderr.strip()[-500:]}")
        row = run_row(task, family(task), seed, folder, cap=cap, cpu=cpu_model(), note=note)
        row["command_wall_s"] = round(time.monotonic() - started, 1)
        row["said"] = [line for line in done.stdout.splitlines() if line.startswith("her-run: ")]
    return row


def same_as(run: Path, task: str, seed: int, seconds: float) -> int:
    """The plain command for ``seconds``, then SIGTERM (her-run stops at a checkpoint); its config and
    metrics rows against ``run``'s."""
    import signal

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "run"
        Path(tmp, "sb3_bitflip.py").write_text(SB3_BITFLIP)
        command = ["env=gym", f"env.id={task}", f"seed={seed}", "progress=false", f"hydra.run.dir={folder}"]
        with open(Path(tmp, "stderr.txt"), "w+") as err:  # a file, not a pipe: a long run cannot fill it
            proc = subprocess.Popen([str(Path(sys.executable).with_name("her-run")), *command], cwd=tmp,
                                    stdout=subprocess.DEVNULL, stderr=err)
            try:
                proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
                proc.wait()
            err.seek(0)
            if not (folder / "metrics.jsonl").is_file():
                raise SystemExit(f"{task}: the plain command wrote no metrics in {seconds:g} s: {err.read().strip()[-300:]}")
        keys, equal, differs = same_run(run, folder)
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    said = f"her-run env=gym env.id={task} seed={seed}"
    upto = "" if not equal else f", to env step {rows[equal - 1]['step']:,} with " \
        f"{sum('eval/success_rate' in r for r in rows[:equal])} evaluation(s)"
    print(f"{said}: config {'the same' if not keys else 'differs at ' + ', '.join(keys)} (resume and progress aside); "
          f"{equal} of its {len(rows)} metrics rows equal {run}'s first ones{upto} (wall time and SPS aside)"
          + ("" if differs is None else f"; the first that differs is at env step {differs:,}"), flush=True)
    return 0 if not keys and differs is None and equal else 1


def add(path: Path, row: dict) -> None:
    """The row into ``path``, replacing one of the same task and seed (written atomically)."""
    old = json.loads(path.read_text()) if path.exists() else {"rows": []}
    rows = [r for r in old["rows"] if (r["task"], r["seed"]) != (row["task"], row["seed"])] + [row]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=[], help="env ids (a user module's as module:Id)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--cap", type=int, default=None, help="stop each run at this many env steps")
    parser.add_argument("--record", type=Path, default=None, help="the row of this run folder instead of a run")
    parser.add_argument("--wall", type=float, default=None, help="with --record: the wall s of a run stopped by hand")
    parser.add_argument("--same-as", type=Path, default=None,
                        help="a run folder: is it the plain command's run? (runs that command for --seconds)")
    parser.add_argument("--seconds", type=float, default=150.0, help="with --same-as: how long the plain command runs")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--note", default="", help="what else ran on the machine")
    parser.add_argument("--page", type=Path, default=None, help="regenerate this page's results section")
    parser.add_argument("--png", default=None, help="with --page: the curves, written here and shown on the page")
    args = parser.parse_args(argv)
    if args.same_as:
        raise SystemExit(same_as(args.same_as, args.tasks[0], args.seeds[0], args.seconds))
    if args.record:
        row = run_row(args.tasks[0], family(args.tasks[0]), args.seeds[0], args.record, cap=args.cap, cpu=cpu_model(),
                      note=args.note, wall_s=args.wall)
        add(args.json, row)
        print(json.dumps({k: v for k, v in row.items() if k != "evals"}), flush=True)
    for task in [] if args.record else args.tasks:
        for seed in args.seeds:
            row = run_task(task, seed, args.cap, args.note)
            add(args.json, row)
            print(json.dumps({k: v for k, v in row.items() if k != "evals"}), flush=True)
    if args.page:
        rows = json.loads(args.json.read_text())["rows"]
        shown = None
        if args.png and rows:
            plot(rows, args.png)
            shown = os.path.relpath(args.png, args.page.parent)
        args.page.write_text(replace_section(args.page.read_text(), rows, shown))


if __name__ == "__main__":
    main()
