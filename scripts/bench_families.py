"""One measured row per third-party env family: the command a user types, run as it is.

    .venv/bin/python scripts/bench_families.py --rows point_maze panda_reach --json docs/bench/families.json

Each row runs ``her-run`` in a fresh folder with the row's overrides (its id, by the family's own
name; a budget; nothing else unless the row says so) and records the env steps, greedy success
(last step and any step) at each evaluation, the wall time, and the CPU. Rows already in ``--json``
are kept: a row of the same name and seed is replaced. Needs the robotics, panda and bench extras.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# SB3's bit-flipping env, registered from a user module as a user would (her-rl's own module is
# not involved): n=15 bits, an episode of 15 steps.
SB3_BITFLIP = '''import gymnasium as gym
gym.register(id="SB3BitFlip-v0", entry_point="stable_baselines3.common.envs:BitFlippingEnv",
             kwargs={"n_bits": 15, "max_steps": 15}, max_episode_steps=15)
'''

ROWS = {
    "point_maze": ("gymnasium-robotics", ["algo=her_sac", "env=gym", "env.id=PointMaze_UMaze-v3"], 100_000),
    "ant_maze": ("gymnasium-robotics", ["algo=her_sac", "env=gym", "env.id=AntMaze_UMaze-v5"], 50_000),
    "fetch_push": ("gymnasium-robotics", ["algo=her_sac", "env=gym", "env.id=FetchPush-v4"], 50_000),
    "panda_reach": ("panda-gym", ["algo=her_sac", "env=gym", "env.id=PandaReach-v3"], 20_000),
    "panda_push": ("panda-gym", ["algo=her_sac", "env=gym", "env.id=PandaPush-v3"], 50_000),
    "sb3_bitflip": ("Stable-Baselines3 (a user module)",
                    ["algo=her_dqn", "env=gym", "env.id=sb3_bitflip:SB3BitFlip-v0"], 100_000),
}


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_row(name: str, seed: int, budget: int | None, extra: list[str]) -> dict:
    family, overrides, default_budget = ROWS[name]
    budget = budget or default_budget
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "run"
        Path(tmp, "sb3_bitflip.py").write_text(SB3_BITFLIP)
        args = [*overrides, f"seed={seed}", f"budget.env_steps={budget}", *extra]
        command = ["her-run", *args]
        started = time.monotonic()
        done = subprocess.run([str(Path(sys.executable).with_name("her-run")), *args, "progress=false",
                               f"hydra.run.dir={folder}"], cwd=tmp, capture_output=True, text=True)
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"{name}: her-run exited {done.returncode}: {done.stderr.strip()[-500:]}")
        results = json.loads((folder / "results.json").read_text())
        evals = []
        for line in (folder / "metrics.jsonl").read_text().splitlines():
            row = json.loads(line)
            if "eval/success_rate" in row:
                evals.append([row["step"], row["eval/success_rate"], row.get("eval/any_success_rate")])
    return {"row": name, "family": family, "command": " ".join(command), "seed": seed, "budget": budget,
            "env_steps": results["env_steps"], "success": results.get("eval_success_rate"),
            "any_success": results.get("eval_any_success_rate"), "solved": results["solved"],
            "solved_at_env_steps": results["solved_at_env_steps"], "train_wall_s": results["wall_time_s"],
            "command_wall_s": round(wall, 1), "evals": evals, "cpu": cpu(), "stdout_tail": done.stdout.strip()[-200:]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=sorted(ROWS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--budget", type=int, default=None, help="env steps (default: the row's)")
    parser.add_argument("--json", type=Path, default=None, help="add the rows to this file")
    parser.add_argument("--note", default="", help="what else ran on the machine")
    parser.add_argument("extra", nargs="*", help="more her-run overrides for every row")
    args = parser.parse_args(argv)
    for name in args.rows:
        for seed in args.seeds:
            row = run_row(name, seed, args.budget, args.extra)
            row["note"] = args.note
            print(json.dumps({k: v for k, v in row.items() if k != "evals"}), flush=True)
            if args.json:
                old = json.loads(args.json.read_text()) if args.json.exists() else {"rows": []}
                rows = [r for r in old["rows"] if (r["row"], r["seed"]) != (name, seed)] + [row]
                tmp = args.json.with_suffix(".tmp")
                tmp.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
                os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
