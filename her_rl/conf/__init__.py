"""her-run's Hydra configs. Importing this package (Hydra does, to find the files) also stores the
``algo`` group, which is read from the algorithm classes (her_rl/algo_group.py)."""

from her_rl.algo_group import store

store()
