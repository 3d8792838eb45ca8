"""A run folder's side of resuming: whether it holds a checkpoint (and whether that changed under a
check), whether this command may resume it, the config a run saved before its first checkpoint, and the
keys an earlier version saved that no learner takes now. How the saved config and this command's
overrides merge is her_rl/config/saved.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from her_rl.errors import ConfigError, one_line, outside
from her_rl.folder.parse import YAML_MAX_CHARS, yaml_checked
from her_rl.folder.rundir import CONFIG


RETIRED: dict[str, dict[str, Any]] = {
    "her_redq": {"simultaneous": False, "critic_threads": 1, "actor_half": "thread"},
    "her_crossq": {"simultaneous": False, "actor_half": "thread"},
}
"""Algo -> keys it once declared but never took, each with the one value it allowed: runs saved before
they went hold them, and nothing the learner reads (any other value stays, for the key check to refuse)."""


def without_retired(config: dict[str, Any]) -> dict[str, Any]:
    """A saved config (``config.yaml`` or a checkpoint's) without the :data:`RETIRED` keys of its algo."""
    algo = config.get("algo")
    retired = RETIRED.get(algo.get("name"), {}) if isinstance(algo, dict) and isinstance(algo.get("name"), str) else {}
    gone = [k for k, v in retired.items() if k in algo and type(algo[k]) is type(v) and algo[k] == v]
    if not gone:
        return config
    return {**config, "algo": {k: v for k, v in algo.items() if k not in gone}}


def stamp(path: Path) -> tuple[int, int] | None:
    """(mtime, size) of a file, None if absent: a checkpoint written between a check and the lock shows."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def read_saved_config(out: Path) -> dict[str, Any]:
    """The ``config.yaml`` of a run that stopped before its first checkpoint; one line if unreadable."""
    try:
        with open(out / CONFIG, "rb") as f:
            data = f.read(YAML_MAX_CHARS + 1)  # no more than the limit is read
        if len(data) > YAML_MAX_CHARS:
            raise ValueError(f"more than {YAML_MAX_CHARS:,} bytes, larger than any her-rl config")
        saved = OmegaConf.to_container(OmegaConf.create(yaml_checked(data.decode("utf-8"))), resolve=False)
    except Exception as exc:  # noqa: BLE001  (unreadable, not YAML, not UTF-8)
        raise ConfigError(f"resume=auto: cannot read {out / CONFIG} ({outside(one_line(exc)[:200])}); move it away to start "
                          "a new run there") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("algo"), dict) or not isinstance(saved.get("env"), dict):
        raise ConfigError(f"resume=auto: {out / CONFIG} is not a her-rl run's config; move it away to start a new "
                          "run there")
    return without_retired(saved)


def check_resume(out: Path, stamp: tuple[int, int] | None, mode: Any, requeued: bool = False) -> None:
    """A checkpoint in the folder only with resume (or a requeued job); resume=true needs one."""
    if stamp is not None and mode is False and not requeued:  # a requeued job resumes
        raise ConfigError(f"{out} already holds a checkpoint; pass resume=true to continue that run "
                          "(resume=auto: continue if there is one), or use a new folder")
    if stamp is None and mode is True:
        what = "does not exist" if not out.is_dir() else (
            "holds no checkpoint (the run stopped before its first one; resume=auto starts it afresh)"
            if (out / CONFIG).exists() else "holds no checkpoint")
        raise ConfigError(f"resume=true: run folder {out} {what}")
