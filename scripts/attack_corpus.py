"""Run the adversarial corpus (bench/attacks.py) and count, per category, the attacks that broke each rule.

    .venv/bin/python scripts/attack_corpus.py --json attack_corpus.json

Each attack (a run folder tampered with mid-run, a misbehaving user env, a launcher or sweeper setting,
a foreign run folder given to resume=, load= or her-summary) runs in a sandbox of its own, as a forked
child of this process, and is held to five rules at once: nothing written outside the run folders it
names (a decoy folder byte for byte), no traceback, no hang, no foreign module imported, an exit status
the docs name. The table gives, per category, the attacks run and how many broke each rule, how many
ended with the exit status and words the attack expects, and how many are known defects (left open;
tests/test_adversarial.py marks them xfail). ``--json`` writes the same counts and every broken rule.
Exit status 1 when an attack that is not a known defect broke a rule or ended otherwise than expected.
The same table runs as tests in tests/test_adversarial.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench import attacks  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", default=[], metavar="WORDS",
                   help="run only the attacks whose name or category holds one of these")
    p.add_argument("--json", type=Path, help="write the counts and every broken rule here")
    p.add_argument("--timeout", type=float, default=attacks.TIMEOUT_S, help="seconds after which an attack is a hang")
    p.add_argument("--keep", action="store_true", help="keep the sandboxes (their folder is printed)")
    return p


def template_run(folder: Path) -> Path:
    """A finished tiny run to copy into the sandboxes."""
    run = folder / "template"
    done = attacks.run_forked(["her-run", *attacks.TINY, "budget.env_steps=200", f"hydra.run.dir={run}"], folder)
    if done.code != 0:
        raise SystemExit(f"attack_corpus: the template run failed ({done.code}): {done.stderr.strip()[-500:]}")
    return run


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    chosen = [a for a in attacks.ATTACKS
              if not args.only or any(w in a.name or w in a.category for w in args.only)]
    codes = attacks.documented_exit_codes()
    attacks.warm()
    base = Path(tempfile.mkdtemp(prefix="her-rl-attacks-"))
    results, start, cpu = [], time.monotonic(), os.times()
    try:
        template = template_run(base)
        for i, attack in enumerate(chosen):
            result = attacks.run_attack(attack, base / str(i), template, codes, timeout=args.timeout)
            results.append(result)
            mark = "ok" if result.clean else ("known defect" if attack.defect else "BROKEN")
            lines = [f"{rule}: {what[:300]}" for rule, what in result.broken.items()]
            lines += [f"unexpected: {result.expected[:300]}"] if result.expected else []
            print(f"{mark:>12}  {attack.category}: {attack.name} (exit {result.outcome.code}, "
                  f"{result.outcome.seconds:.1f} s)" + "".join(f"\n{'':14}{line}" for line in lines), flush=True)
    finally:
        if args.keep:
            print(f"sandboxes kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    counts = attacks.summary(results)
    end = os.times()
    counts["seconds"] = round(time.monotonic() - start, 1)
    counts["cpu_seconds"] = round(sum(end[:4]) - sum(cpu[:4]), 1)  # this process and its children
    header = ["category", "attacks", *[f"{rule} broken" for rule in attacks.RULES], "as expected", "known defects"]
    rows = [[c, *counts["by_category"][c].values()] for c in attacks.CATEGORIES] + [["all", *counts["total"].values()]]
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")
    print(f"{counts['total']['attacks']} attacks in {counts['seconds']} s ({counts['cpu_seconds']} s of CPU)")
    if args.json:
        args.json.write_text(json.dumps(counts, indent=2) + "\n")
    unknown = [r for r in results if not r.clean and not r.attack.defect]
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
