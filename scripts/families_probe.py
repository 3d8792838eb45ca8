"""Which goal envs of the third-party families run: each id (its newest version) trained for one step.

    .venv/bin/python scripts/families_probe.py            # every id of gymnasium-robotics and panda-gym
    .venv/bin/python scripts/families_probe.py --match Hand

Each id gets ``her_rl.train`` with HER-SAC, a budget of one env step, one greedy evaluation episode
and a tiny network, in a temporary folder; a line per id says ``ok`` or the one-line error her-rl
gave. Dense-reward variants are left out (HER relabels sparse rewards). Needs the robotics and panda
extras.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time

import gymnasium as gym

import her_rl
from her_rl.envs import families


def newest_ids(match: str) -> list[str]:
    for family in families.FAMILIES:
        families.load(family, family.name)
    newest: dict[str, int] = {}
    for env_id in gym.registry:
        found = re.fullmatch(r"(.*)-v(\d+)", env_id)
        if ":" in env_id or "Dense" in env_id or not found or families.family_of(env_id) is None:
            continue
        base, version = found.group(1), int(found.group(2))
        newest[base] = max(version, newest.get(base, version))
    return sorted(f"{base}-v{v}" for base, v in newest.items() if re.search(match, base))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--match", default="", help="only ids whose name matches this regular expression")
    args = parser.parse_args(argv)
    ids, ran = newest_ids(args.match), 0
    for env_id in ids:
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            try:
                results = her_rl.train(["algo=her_sac", "env=gym", f"env.id={env_id}", "budget.env_steps=1",
                                        "progress=false", "eval.episodes=1", "algo.hidden=[8]", "algo.batch_size=8",
                                        "checkpoint.save_replay=false"], out_dir=f"{tmp}/run")
                line, ran = f"ok (success read: {'eval_success_rate' in results})", ran + 1
            except (her_rl.ConfigError, her_rl.EnvError) as exc:
                line = f"refused: {exc}"
            except Exception as exc:  # noqa: BLE001  (what her-rl would show as a traceback: a defect)
                line = f"DEFECT, a traceback: {type(exc).__name__}: {exc}"
        print(f"{env_id}: {line} ({time.monotonic() - started:.1f} s)", flush=True)
    print(f"{ran} of {len(ids)} ids ran")


if __name__ == "__main__":
    main()
