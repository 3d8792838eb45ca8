"""What the benchmark scripts in ``scripts/`` are made of; each script parses its arguments and
calls one of the benchmark families here: :mod:`.bitflip` (HER-DQN against SB3 DQN + HER),
:mod:`.continuous` (HER-SAC / HER-DDPG against SB3 SAC + HER), :mod:`.likeforlike` (continuous HER
against RL-Zoo's settings and against SB3 twins given our values, peers in :mod:`.zoo`), :mod:`.profile` (a
FetchPush iteration, phase by phase), :mod:`.push` (HER-DQN with and
without hindsight), :mod:`.onpolicy` (PPO against SB3 PPO, REINFORCE, RND-PPO against PPO),
:mod:`.speed` (env throughput) and :mod:`.probe` (RND-PPO on deep sea, watched).

They share: a run of ours with overrides and its curves (:mod:`.ours`), the Stable-Baselines3 peers
trained with the same evaluation protocol (:mod:`.peers`, SB3 imported only there and only when a
peer is built), what a run reports (:mod:`.rows`), medians over seeds where an unsolved seed is only
a lower bound and ratios of such medians (:mod:`.stats`), the markdown tables (:mod:`.tables`) and
the job loop: one process per job, the JSON rows rewritten after every run (:mod:`.jobs`).
"""

from bench.jobs import each_result, run_jobs, write_report, write_rows
from bench.ours import OursRun, run_ours
from bench.rows import Row, solve_row, target_row
from bench.stats import (Stat, censored_median, exact_median, first_reaching, known_median, ratio, side_medians,
                                to_target)

__all__ = ["OursRun", "Row", "Stat", "censored_median", "each_result", "exact_median", "first_reaching",
           "known_median", "ratio", "run_jobs", "run_ours", "side_medians", "solve_row", "target_row", "to_target",
           "write_report", "write_rows"]
