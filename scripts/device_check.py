"""Each learner for a few hundred updates on the CPU and, where torch sees one, on a CUDA device: env
steps/s and (for the hindsight learners) gradient updates/s side by side, one row per learner and device.

    .venv/bin/python scripts/device_check.py                 # every learner, cpu and cuda if there is one
    .venv/bin/python scripts/device_check.py --algos her_sac ppo --steps 4000 --json device_check.json

Each row is one ``her_rl.train`` run in a folder of its own (removed after), seed 0, no evaluation
between, so the time is collection plus updates; the first run on a device pays its start-up (CUDA's
context) once more than the others. Say which CPU and GPU gave a row, and what else ran.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import her_rl  # noqa: E402
from her_rl.folder import checkpoint  # noqa: E402

# The task each learner is checked on, with the keys that keep the run to a few hundred updates.
TASKS = {
    "her_dqn": ["env=bitflip", "n=15"],
    "her_ddpg": ["env=push", "env.kwargs.actions=continuous"],
    "her_sac": ["env=push", "env.kwargs.actions=continuous"],
    "her_td3": ["env=push", "env.kwargs.actions=continuous"],
    "her_redq": ["env=push", "env.kwargs.actions=continuous"],
    "her_crossq": ["env=push", "env.kwargs.actions=continuous"],
    "reinforce": ["env=cartpole"],
    "ppo": ["env=cartpole"],
    "rnd_ppo": ["env=cartpole"],
}


def one_run(algo: str, device: str, steps: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="her-device-") as root:
        out = Path(root) / "run"
        overrides = [f"algo={algo}", *TASKS[algo], f"device={device}", "seed=0", f"budget.env_steps={steps}",
                     "progress=false", "eval.every_iterations=1000000", "eval.episodes=1", "checkpoint.every_s=0"]
        start = time.perf_counter()
        results = her_rl.train(overrides, out_dir=out)
        if device == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        updates = checkpoint.load(out).get("agent", {}).get("updates")  # the hindsight learners count theirs
    row = {"algo": algo, "device": device, "env_steps": int(results["env_steps"]), "wall_s": round(wall, 2),
           "env_steps_per_s": round(results["env_steps"] / wall, 1)}
    if isinstance(updates, int) or (torch.is_tensor(updates) and updates.numel() == 1):
        row["updates"] = int(updates)
        row["updates_per_s"] = round(int(updates) / wall, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--steps", type=int, default=4000, help="env steps per run (default 4000)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda or 'none'}); CPU {platform.processor() or platform.machine()}"
          f"; GPU {gpu or 'none'}")
    rows = []
    print("| learner | device | env steps | wall s | env steps/s | updates | updates/s |")
    print("|---|---|---|---|---|---|---|")
    for algo in args.algos:
        for device in devices:
            row = one_run(algo, device, args.steps)
            rows.append(row)
            print(f"| {algo} | {device} | {row['env_steps']:,} | {row['wall_s']} | {row['env_steps_per_s']} | "
                  f"{row.get('updates', '-')} | {row.get('updates_per_s', '-')} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": gpu,
                                         "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
