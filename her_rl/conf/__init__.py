"""her-run's Hydra configs. Importing this package (Hydra does, to find the files) also stores the
configs taken from the code: the ``algo`` group, read from the algorithm classes, and the push/drag
settings (her_rl/config_store.py)."""

from her_rl.config_store import store

store()
