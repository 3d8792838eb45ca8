"""What the benchmark scripts in ``scripts/`` share: a run of ours with overrides and its curves
(:mod:`.ours`), medians over seeds where an unsolved seed is only a lower bound and ratios of such
medians (:mod:`.stats`), and the job loop: one process per job, the JSON report rewritten after
every run (:mod:`.jobs`). No Stable-Baselines3 here: each script builds its own peer.
"""

from her_rl.bench.jobs import each_result, write_report
from her_rl.bench.ours import OursRun, run_ours
from her_rl.bench.stats import Stat, censored_median, exact_median, first_reaching, ratio, side_medians, to_target

__all__ = ["OursRun", "Stat", "censored_median", "each_result", "exact_median", "first_reaching", "ratio",
           "run_ours", "side_medians", "to_target", "write_report"]
