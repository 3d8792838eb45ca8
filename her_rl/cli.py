"""``her-run``: the Hydra entry point.

Before Hydra runs (and creates a run folder), the command is composed and checked here: flags and
overrides that would make Hydra run code (:func:`her_rl.overrides.check_overrides`), group names,
Hydra's own override and key errors, every value, the env's spaces, the run or sweep folder, the
launcher, and every key the run needs (a ``~KEY`` that deletes one is named). A problem is one line
``her-run: error: ...`` (control characters escaped, a huge value cut to its ends) and exit status 2,
with nothing created or written. A signal outside training ends her-run with 128 + the signal and one
line saying what is on disk (:class:`her_rl.signals.Stage`); training's own handlers do the same.
``load=`` evaluates without Hydra's run machinery, so no run folder is made for it. Inside the
Hydra job, a refused run removes the (empty) folder Hydra made for it. ``--version`` is her-rl's;
``--help`` is Hydra's, with her-run's template (``conf/hydra/help/her_rl.yaml``).
"""

from __future__ import annotations

import contextlib
import io
import re
import signal
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from her_rl import rundir, schema, sweep_failures, video
from her_rl.envs.custom import import_given
from her_rl.errors import ConfigError, EnvError, NonFiniteError, OutputError, one_line, printable
from her_rl.overrides import check_overrides, one_value_each, sweep_values
from her_rl.plan import check_sweep, sweep_variants
from her_rl.registry import algo_info, check_env_name
from her_rl.rules import check_path
from her_rl.signals import Stage, Stopped, early_stops, exit_at_once

# Flags after which Hydra does something other than run jobs (help, printing the config, ...).
_RUN_FLAGS = ("-m", "--multirun")
_HELP_FLAGS = ("--help", "-h")
# Hydra's flags that only print or pick multirun; the others read configs from elsewhere (--config-dir,
# --config-path, --config-name) or unpickle a file (--experimental-rerun). -r is the default mode.
_FLAGS = (*_RUN_FLAGS, *_HELP_FLAGS, "--hydra-help", "--version", "-c", "--cfg", "--resolve", "-p", "--package",
          "-i", "--info", "-sc", "--shell-completion")
_SINGLE_RUN = ("-r", "--run")
# Hydra's modes, short flag -> long: Hydra accepts one per command.
_MODES = {"-m": "--multirun", "-c": "--cfg", "-i": "--info", "-sc": "--shell-completion"}
_EXTRAS = {"hydra/launcher/ray": "ray", "hydra/launcher/joblib": "launchers", "hydra/sweeper/optuna": "tune",
           "hydra/launcher/submitit_local": "launchers", "hydra/launcher/submitit_slurm": "launchers"}
_DIRECTION = "hydra.sweeper.direction"

rundir.register_resolvers()  # ${run_suffix:} in hydra.run.dir, also in launcher worker processes
_STAGE = Stage()  # how far this command got, for the line a signal that stops it ends with




def _say(text: object) -> None:
    """The one place her-run prints a line of its own to stderr."""
    print(f"her-run: {printable(text)}", file=sys.stderr, flush=True)


def _fail(message: object, code: int = 2) -> None:
    _say(f"error: {message}")
    sys.exit(code)


def _check_tuned_name(name: str) -> None:
    """``tuned`` is an optional group (absent for most algo/env pairs), so Hydra would silently skip a
    misspelt explicit choice: refuse it here instead."""
    if name == "None":
        raise ConfigError("tuned=null is not accepted; pass ~tuned to run without the tuned file")
    names = sorted(p.stem for p in (Path(__file__).parent / "conf" / "tuned").glob("*.yaml"))
    if name not in names:
        raise ConfigError(f"unknown tuned file '{name}'; valid choices: {', '.join(names)}")


def check_group_names(overrides: list[str]) -> None:
    """Reject an override that would make Hydra run code (:func:`her_rl.overrides.check_overrides`), then
    unknown algo/env/tuned names with one line listing the choices, before Hydra composes (sweeps
    included: ``algo=ppo,reinforce``, ``env=choice(cartpole,nope)``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    check_overrides(overrides)
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.is_delete() and override.key_or_group in schema.GROUPS:  # Hydra would fail on ${algo}_${env}
            raise schema.missing(override.key_or_group, [override.input_line])
        check = {"algo": algo_info, "env": check_env_name, "tuned": _check_tuned_name}.get(override.key_or_group)
        if check is None or override.is_delete():
            continue
        for name in sweep_values(override):
            check(str(name))


def _malformed(overrides: list[str]) -> str | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except Exception:
            return override
    return None


def hydra_message(exc: BaseException, overrides: list[str]) -> str:
    """One line for an error Hydra or OmegaConf raised while composing the config."""
    from hydra.errors import MissingConfigException, OverrideParseException

    text = str(exc)
    if isinstance(exc, OverrideParseException):
        bad = _malformed(overrides)
        return (f"malformed override {bad!r}: " if bad else "malformed override: ") + one_line(text.splitlines()[0]) \
            + " (override grammar: https://hydra.cc/docs/advanced/override_grammar/basic)"
    found = re.match(r"Could not override '([^']+)'", text)
    if found:
        key, cause = found.group(1), str(exc.__cause__ or "")
        if "not in struct" in cause or "not in '" in cause:
            return f"unknown config key '{key}' (her-run --cfg job lists the keys; +{key}=VALUE adds a new one)"
        return f"cannot set '{key}': {one_line(cause.splitlines()[0] if cause else text)}"
    if isinstance(exc, MissingConfigException):
        lines = [line.strip() for line in text.split("Config search path")[0].splitlines() if line.strip()]
        head, options = lines[0], [line for line in lines[1:] if not line.startswith("Available")]
        extra = next((extra for path, extra in _EXTRAS.items() if f"'{path}'" in head), None)
        hint = f" (it comes with her-rl's {extra} extra: pip install -e \".[{extra}]\")" if extra else ""
        return head + (f"; available: {', '.join(options)}" if options else "") + hint
    return one_line(text.split("Config search path")[0])


def _compose(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def _task_config(cfg: DictConfig) -> DictConfig:
    task = cfg.copy()
    with open_dict(task):
        del task["hydra"]
    return task


def _explicit_run_dir(cfg: DictConfig) -> Path | None:
    """hydra.run.dir when the command gave it (the default names a new, unique folder)."""
    if any(o.split("=", 1)[0].lstrip("+") == "hydra.run.dir" for o in cfg.hydra.overrides.hydra):
        out = rundir.folder_path(OmegaConf.select(cfg, "hydra.run.dir"), "hydra.run.dir")
        check_path("hydra.run.dir", out)
        _STAGE.folder = out
        return out
    return None


def _check_composed(cfg: DictConfig, overrides: list[str], values: bool = True) -> DictConfig:
    """The task config of a composed command, with every key the run needs (``~KEY`` deletions are
    named) and, with ``values``, every value checked; a load= command's values are checked by load."""
    from her_rl.config import validate

    task = _task_config(cfg)
    schema.check_required(OmegaConf.to_container(task), overrides)
    if values and not task.get("load"):
        validate(task, overrides)
    return task


def _preflight(argv: list[str]) -> tuple[DictConfig, list[str], Path | None] | None:
    """Compose and check the command as Hydra will run it. Returns what ``load=`` needs to be
    evaluated here, or None to go on with Hydra."""
    from her_rl.runner import CHECKPOINT, plan_run

    overrides = [a for a in argv if a not in _RUN_FLAGS]
    if set(argv) & set(_RUN_FLAGS):
        for i, variant in enumerate(sweep_variants(overrides)):
            cfg = _compose(variant)
            if i == 0:
                check_sweep(cfg)
            _check_composed(cfg, variant)
        return None
    cfg = _compose(overrides)
    task_overrides = list(cfg.hydra.overrides.task)
    task, out = _check_composed(cfg, task_overrides, values=False), _explicit_run_dir(cfg)
    if task.get("load"):
        if isinstance(task.get("load"), str):
            check_path("load", task["load"])
        return task, task_overrides, out
    if task.get("resume") is True and out is None:
        raise ConfigError("resume=true needs the folder of the run to continue: add hydra.run.dir=<run folder>")
    if out is not None and task.get("resume") in (True, "auto") and (out / CHECKPOINT).exists():
        return None  # checked inside the job against the saved config (the folder exists already)
    plan = plan_run(task, out, task_overrides)  # out None: a new default folder, nothing to read there
    if plan.lock is not None:
        plan.lock.release()
    return None


def _run_load(task: DictConfig, overrides: list[str], out: Path | None) -> None:
    from her_rl.evaluation import evaluate_checkpoint

    _STAGE.name = "load"
    try:
        evaluate_checkpoint(task, out, overrides)
    except (ConfigError, EnvError, OutputError) as exc:
        _fail(exc, exc.exit_code)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig

    from her_rl.runner import run

    hc = HydraConfig.get()
    out, overrides = Path(hc.runtime.output_dir), list(hc.overrides.task)
    _STAGE.folder = out
    if sweep_failures.in_multirun():
        _STAGE.sweep = Path(hc.sweep.dir)
    sweep_failures.clear(out)  # a new attempt in this folder
    try:
        return objective(run(cfg, out_dir=out, overrides=overrides), cfg.get("objective", "final_eval"))
    except Exception as exc:
        if sweep_failures.in_multirun():  # the basic launcher runs every job in this process: no sys.exit here
            return sweep_failures.job_failed(out, exc, overrides)
        if isinstance(exc, ConfigError):
            rundir.remove_if_empty(out)  # the folder Hydra made for this refused run
        if isinstance(exc, (ConfigError, EnvError, NonFiniteError, OutputError)):
            _fail(exc, exc.exit_code)
        raise


def objective(results: dict, kind: str = "final_eval") -> float | None:
    """The number a sweeper (Optuna) maximises; ``load=`` evaluations return None."""
    if "env_steps" not in results:
        return None
    if kind == "steps_to_solve":
        solved = results.get("solved_at_env_steps")
        return -float(solved) if solved is not None else -2.0 * float(results["env_steps"])
    value = results.get("eval_success_rate", results.get("eval_return"))
    return float(value) if value is not None else float("nan")


def optuna_settings(argv: list[str]) -> list[str]:
    """The command with what the Optuna sweeper needs added when it is picked: the direction
    ``maximize`` (Optuna minimises by default, and every objective her-run returns is to be
    maximised; another direction is refused), and trial folders named by trial number
    (``trial-<n>``), since Optuna may sample the same setting twice and a folder holds one run."""
    keys = {a.lstrip("+~").split("=", 1)[0]: a.partition("=")[2] for a in argv if "=" in a}
    if keys.get("hydra/sweeper") != "optuna":
        return list(argv)
    if _DIRECTION in keys and keys[_DIRECTION].strip("'\"[] ").lower() != "maximize":
        raise ConfigError(f"{_DIRECTION}={keys[_DIRECTION]} is not accepted: her-run's objectives are to be "
                          "maximised (objective=final_eval: the last eval success rate or return; "
                          "steps_to_solve: minus the env steps to solve); leave it out or pass maximize")
    added = [f"{_DIRECTION}=maximize"] if _DIRECTION not in keys else []
    added += ["hydra.sweep.subdir=trial-${hydra.job.num}"] if "hydra.sweep.subdir" not in keys else []
    at = next(i for i, a in enumerate(argv) if a.lstrip("+~").startswith("hydra/sweeper=")) + 1
    return [*argv[:at], *added, *argv[at:]]  # next to the sweeper's override: after a flag's value it would not parse


def _help() -> None:
    """Hydra's ``--help`` with her-run's template; its flag list would call --version Hydra's."""
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text):
            _hydra_main()  # it ends with sys.exit
    finally:
        print(text.getvalue().replace("Show Hydra's version and exit", "Show her-rl's version and exit"), end="")


def _checked_argv(argv: list[str]) -> list[str]:
    """The command as Hydra is to get it: her-rl's additions made (Optuna's direction, ``video=true``),
    ``-r`` dropped (running is Hydra's default), and refused if a flag would read configs from
    elsewhere or unpickle a file, or an override would make Hydra run code."""
    argv = video.expand_overrides(optuna_settings([a for a in argv if a not in _SINGLE_RUN]))
    for flag in (a.split("=", 1)[0] for a in argv if a.startswith("-")):
        if flag not in _FLAGS:
            raise ConfigError(f"{flag} is not accepted: her-run reads only her-rl's own configs; its flags are "
                              "-m, --help, --hydra-help, --version, --cfg, --resolve, --package, --info, "
                              "--shell-completion")
    modes = sorted({_MODES.get(a, a) for a in argv if a in (*_MODES, *_MODES.values())})
    if len(modes) > 1:
        raise ConfigError(f"{' and '.join(modes)} cannot be combined: give one of -m, --cfg, --info and "
                          "--shell-completion")
    check_overrides([a for a in argv if not a.startswith("-")])
    return argv


def _main() -> None:
    from her_rl import __version__

    if "--version" in sys.argv[1:]:
        print(f"her-rl {__version__}")
        return
    try:
        sys.argv[1:] = _checked_argv(sys.argv[1:])  # Hydra reads sys.argv
    except ConfigError as exc:
        _fail(exc)
    argv = sys.argv[1:]
    if any(a.startswith("-") and a not in _RUN_FLAGS for a in argv):
        _checked(lambda: _check_shown(argv), _shown_overrides(argv))
        if set(argv) & set(_HELP_FLAGS):
            _help()
        else:
            _hydra_main()  # --cfg job, --info, ...: Hydra's business, nothing is run
        return
    overrides = [a for a in argv if a not in _RUN_FLAGS]
    load = _checked(lambda: _check_and_import(argv, overrides), overrides)
    if load is not None:
        _run_load(*load)
        _STAGE.name = "done"
        return
    _STAGE.name = "sweep" if set(argv) & set(_RUN_FLAGS) else "job"
    _hydra_main()
    _STAGE.name = "done"
    sweep_failures.exit_if_failed()  # a multirun whose jobs failed ends with one line, after its summary


def _check_and_import(argv: list[str], overrides: list[str]):
    check_group_names(overrides)
    import_given(one_value_each(overrides))  # env.id=module:Env-v0: the module the user named registers the env
    return _preflight(argv)


def _checked(check, overrides: list[str]):
    """``check()``, its refusal one line with exit status 2 (an OS error on a path too)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        return check()
    except ConfigError as exc:
        _fail(exc)
    except (HydraException, OmegaConfBaseException) as exc:
        _fail(hydra_message(exc, overrides))
    except OSError as exc:  # a folder her-run looked at: no permission to look, a loop of links, ...
        _fail(f"cannot use {exc.filename or 'a path'}: {exc.strerror or exc}")
    except RecursionError:
        _fail("the command is nested too deeply to read (brackets or braces in a value)")


def _shown_overrides(argv: list[str]) -> list[str]:
    with_value = {"--cfg", "-c", "--package", "-p", "--info", "-i", "--shell-completion", "-sc"}
    return [a for i, a in enumerate(argv) if not a.startswith("-") and not (i and argv[i - 1] in with_value)]


def _check_shown(argv: list[str]) -> None:
    """What Hydra is to show (``--help``, ``--cfg``, ``--info``) composes, so a bad override is one line
    rather than Hydra's report; ``--cfg job n=abc`` shows a config only if ``her-run n=abc`` would
    accept it."""
    if set(argv) & {"--shell-completion", "-sc"}:
        return  # its arguments are completion queries, not overrides
    overrides = _shown_overrides(argv)
    check_group_names(overrides)
    multirun = bool(set(argv) & set(_RUN_FLAGS))
    cfg = _compose(sweep_variants(overrides)[0] if multirun else overrides)
    if set(argv) & {"--cfg", "-c"} and not multirun:
        _check_composed(cfg, overrides)


def main() -> None:
    global _STAGE
    _STAGE = Stage()
    with early_stops():  # first: a signal during the checks ends her-run with one line, not killed by it
        try:
            return _main()
        except KeyboardInterrupt as exc:  # Stopped; a second Ctrl-C in training (signals.ABORTED); any other
            stop = exc
        exit_at_once()  # a further signal while this line is printed: exit at once, no traceback
        signum = getattr(stop, "signum", signal.SIGINT)
        _say(_STAGE.stopped_line(signum) if isinstance(stop, Stopped) else str(stop) or "interrupted")
        sys.exit(128 + signum)


__all__ = ["main", "check_group_names", "hydra_message", "optuna_settings"]
