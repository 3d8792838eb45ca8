"""``her-run``: the Hydra entry point. Checks names and values first, then calls ``runner.run``."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from her_rl.registry import ConfigError, algo_info, env_info


def _check_group_names(argv: list[str]) -> None:
    """Reject unknown algo/env names with one line listing the choices, before Hydra composes."""
    for arg in argv:
        for group, check in (("algo", algo_info), ("env", env_info)):
            if arg.startswith(f"{group}="):
                for name in arg.split("=", 1)[1].split(","):
                    check(name.strip())


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    from her_rl.runner import run

    try:
        run(cfg)
    except ConfigError as exc:
        print(f"her-run: error: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    try:
        _check_group_names(sys.argv[1:])
    except ConfigError as exc:
        print(f"her-run: error: {exc}", file=sys.stderr)
        sys.exit(2)
    _hydra_main()


__all__ = ["main"]
