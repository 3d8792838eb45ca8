"""her-run's Hydra configs. Importing this package (Hydra does, to find the files) also stores the
configs taken from the code: the ``algo`` group, read from the algorithm classes, and the push/drag
settings (her_rl/config/registry.py); and it registers the resolvers config.yaml uses, so the configs
compose for any caller of Hydra's compose API, not only her-run."""

from her_rl.config.registry import store
from her_rl.folder.rundir import register_resolvers

store()
register_resolvers()
