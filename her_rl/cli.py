"""``her-run``: the command: its argv, flags, signals and exit codes.

Flags that would read configs from elsewhere or unpickle a file are refused here; the overrides go
through the gate (:func:`her_rl.run.plan.gate`), which checks them once, in one order, before anything
is created: overrides that would make Hydra run code, group names, Hydra's own override and key
errors, every key the run needs, the run folder and the checkpoint to resume, every value, the env's
spaces. A single run is then trained here (:mod:`her_rl.run.runner`), from that one plan, with its
folder locked from the check to the end; ``load=`` is evaluated here (:mod:`her_rl.saved.evaluate`);
a sweep's variants, folder and launcher are checked (:func:`her_rl.run.plan.gate_sweep`) and Hydra's
launcher runs its jobs, each of which plans itself.
A problem is one line ``her-run: error: ...`` (control characters escaped, text from outside cut to
the screen's width: :func:`her_rl.errors.printable`) and exit status 2, with nothing created or
written. A signal outside training ends her-run with 128 + the signal and one line saying what is on
disk (:class:`her_rl.run.signals.Stage`); training's own handlers do the same. Importing this module
loads no torch, so the signals are her-run's from its first moment. ``--version`` is her-rl's;
``--help`` prints her-run's template (``conf/hydra/help/her_rl.yaml``), filled in by her-run when
given alone and by Hydra after overrides.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import string
import sys
import threading
from importlib.metadata import version
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from her_rl.config.compose import check_overrides, expand_overrides, hydra_message
from her_rl.config.registry import stored_groups
from her_rl.errors import ConfigError, EnvError, NonFiniteError, OutputError, printable
from her_rl.folder import failures, rundir
from her_rl.run.launchers import gather_each_job
from her_rl.run.plan import Evaluation, gate, gate_shown, gate_sweep, plan_run
from her_rl.run.signals import Stage, Stopped, early_stops, exit_at_once
from her_rl.run.sweep import isolates, objective, optuna_settings, run_isolated

# Lazy imports in this file (tagged `# lazy: torch`): her_rl.run.runner and her_rl.saved.evaluate load
# torch, and her-run takes its signals first (tests/test_exit_codes.py); the gate (her_rl.run.plan) does
# not, so a refused command is told before torch loads.

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

rundir.register_resolvers()  # ${run_suffix:} in hydra.run.dir, also in launcher worker processes
_STAGE = Stage()  # how far this command got, for the line a signal that stops it ends with
_SWEEP_PID: int | None = None  # her-run's own process, once it starts a sweep (a worker process of it has another)


def _say(text: object) -> None:
    """The one place her-run prints a line of its own to stderr."""
    print(printable(f"her-run: {text}"), file=sys.stderr, flush=True)  # cut to the screen where outside text is long


def _fail(message: object, code: int = 2) -> None:
    _say(f"error: {message}")
    sys.exit(code)


def _preflight(argv: list[str]):
    """The command through its gate (:mod:`her_rl.run.plan`): a single run's checked plan (her-run trains
    it here, in this process, its folder locked from the check to the end) or ``load=``'s evaluation;
    a sweep: None, its variants checked and Hydra's launcher to run its jobs (each plans itself)."""
    overrides = [a for a in argv if a not in _RUN_FLAGS]
    if not set(argv) & set(_RUN_FLAGS):
        return gate(overrides, command=True)
    sys.argv[1:] = gate_sweep(overrides).apply(argv)  # Hydra composes every job from sys.argv
    return None


def _start(checked) -> dict:
    """What the gate let through: a plan trained by the runner, or ``load=``'s evaluation by the saved side."""
    from her_rl.run.runner import start  # lazy: torch
    from her_rl.saved.evaluate import evaluate_checkpoint  # lazy: torch

    return evaluate_checkpoint(checked) if isinstance(checked, Evaluation) else start(checked)


def _run(checked) -> None:
    """Train the checked plan in this process (Hydra's launcher is for sweeps), or evaluate (``load=``)."""
    if isinstance(checked, Evaluation):
        _STAGE.name = "load"
    else:
        _STAGE.name, _STAGE.folder, _STAGE.env_id = "job", checked.out, checked.config["env"].get("id")
        failures.clear(checked.out)  # a new attempt in this folder (it may have been a sweep's job)
    try:
        _start(checked)
    except (ConfigError, EnvError, NonFiniteError, OutputError) as exc:
        _fail(exc, exc.exit_code)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()  # a sweep's job: a single run is trained by _run
    out, overrides = Path(hc.runtime.output_dir), list(hc.overrides.task)
    _STAGE.folder, _STAGE.sweep = out, Path(hc.sweep.dir)
    failures.clear(out)  # a new attempt in this folder

    def job() -> float | None:
        try:
            return objective(_start(plan_run(cfg, out, overrides)), cfg.get("objective", "final_eval"))
        except Exception as exc:  # one line and failed.json; the sweep goes on (every launcher, no sys.exit)
            return failures.job_failed(out, exc, overrides)

    if isolates(hc.launcher, _SWEEP_PID):  # a joblib worker: a job whose process dies must not end the pool
        return run_isolated(job, out, overrides, int(hc.job.num))
    return job()


def help_text() -> str:
    """A bare ``--help``: her-run's template (conf/hydra/help/her_rl.yaml) with $APP_CONFIG_GROUPS filled
    in as Hydra fills it (each group of the installed config files, hydra/ aside, with its options sorted),
    without composing a config: Hydra's --help builds a config repository per group, seconds for a page."""
    conf = Path(__file__).parent / "conf"  # not imported: that stores the learners' configs, through torch
    options = {group: set(names) for group, names in stored_groups().items()}  # stored, not read from files
    for group in (d for d in conf.iterdir() if d.is_dir() and d.name not in ("hydra", "__pycache__")):
        options.setdefault(group.name, set()).update(f.stem for f in group.glob("*.yaml"))
    lines = "".join(f"{group}: {', '.join(sorted(options[group]))}\n" for group in sorted(options))
    node = OmegaConf.create({"hydra": {"help": OmegaConf.load(conf / "hydra" / "help" / "her_rl.yaml")}})
    return string.Template(node.hydra.help.template).substitute(APP_CONFIG_GROUPS=lines) + "\n"


def _checked_argv(argv: list[str]) -> list[str]:
    """The command as Hydra is to get it: her-rl's additions made (Optuna's direction, ``video=true``),
    ``-r`` dropped (running is Hydra's default), and refused if a flag would read configs from
    elsewhere or unpickle a file."""
    argv = expand_overrides(optuna_settings([a for a in argv if a not in _SINGLE_RUN]))
    for flag in (a.split("=", 1)[0] for a in argv if a.startswith("-")):
        if flag not in _FLAGS:
            raise ConfigError(f"{flag} is not accepted: her-run reads only her-rl's own configs; its flags are "
                              "-m, --help, --hydra-help, --version, --cfg, --resolve, --package, --info, "
                              "--shell-completion")
    modes = sorted({_MODES.get(a, a) for a in argv if a in (*_MODES, *_MODES.values())})
    if len(modes) > 1:
        raise ConfigError(f"{' and '.join(modes)} cannot be combined: give one of -m, --cfg, --info and "
                          "--shell-completion")
    return argv  # the overrides: refused or let through by the gate


def _main() -> None:
    global _SWEEP_PID
    if "--version" in sys.argv[1:]:
        print(f"her-rl {version('her-rl')}")  # the installed package's metadata
        return
    try:
        sys.argv[1:] = _checked_argv(sys.argv[1:])  # Hydra reads sys.argv
    except ConfigError as exc:
        _fail(exc)
    argv = sys.argv[1:]
    if argv and set(argv) <= set(_HELP_FLAGS):
        print(help_text(), end="")  # nothing to check or compose
        return
    if any(a.startswith("-") and a not in _RUN_FLAGS for a in argv):
        cfg = _checked(lambda: _check_shown(argv), _shown_overrides(argv))
        if set(argv) & set(_HELP_FLAGS):
            _hydra_main()  # --help after overrides: the template the command selects (her-run's by default)
        elif cfg is not None and _checked(lambda: _show_resolved(cfg, argv), _shown_overrides(argv)):
            return
        else:
            _hydra_main()  # --cfg job, --info, ...: Hydra's business, nothing is run
        return
    checked = _checked(lambda: _preflight(argv), [a for a in argv if a not in _RUN_FLAGS])
    if checked is not None:
        _run(checked)
    else:
        _STAGE.name, _SWEEP_PID = "sweep", os.getpid()
        gather_each_job()  # Ray, submitit: a job whose process dies is one failed job, not the sweep's end
        _hydra_main()
        failures.exit_if_failed()  # a multirun whose jobs failed ends with one line, after its summary
    _STAGE.name = "done"


def _checked(check, overrides: list[str]):
    """``check()``, its refusal one line with exit status 2 (an OS error on a path too)."""
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


def _check_shown(argv: list[str]) -> DictConfig | None:
    """What Hydra is to show (``--help``, ``--cfg``, ``--info``) composes, so a bad override is one line
    rather than Hydra's report; ``--cfg job n=abc`` shows a config only if ``her-run n=abc`` would
    accept it."""
    if set(argv) & {"--shell-completion", "-sc"}:
        check_overrides([a for a in argv if not a.startswith("-")])  # completion queries, refused as overrides are
        return None
    multirun = bool(set(argv) & set(_RUN_FLAGS))
    values = bool(set(argv) & {"--cfg", "-c"}) and not multirun
    cfg, choice = gate_shown(_shown_overrides(argv), multirun, values)
    sys.argv[1:] = choice.apply(argv)  # Hydra shows the config it composes from sys.argv
    return cfg


def _flag_value(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg in names and i + 1 < len(argv):
            return argv[i + 1]
        if any(arg.startswith(f"{name}=") for name in names):
            return arg.partition("=")[2]
    return None


def _show_resolved(cfg: DictConfig, argv: list[str]) -> bool:
    """``--cfg KIND --resolve [--package P]``, shown by her-run: the whole config is resolved as a run
    resolves it, then the part asked for is shown (Hydra resolves the part alone, and fails on a key
    outside it or on a resolver's list)."""
    kind, package = _flag_value(argv, "--cfg", "-c"), _flag_value(argv, "--package", "-p")
    if kind not in ("job", "hydra", "all") or "--resolve" not in argv or set(argv) & set(_RUN_FLAGS):
        return False
    node = OmegaConf.to_container(cfg, resolve=True)
    node = {k: v for k, v in node.items() if (k == "hydra") == (kind == "hydra")} if kind != "all" else node
    for key in [] if package in (None, "_global_") else package.split("."):
        if not isinstance(node, dict) or key not in node:
            raise ConfigError(f"package '{package}' not found in the {kind} config (--cfg {kind})")
        node = node[key]
    text = OmegaConf.to_yaml(node) if isinstance(node, (dict, list)) else f"{node}\n"
    print(f"# @package {package}\n{text}" if package else text, end="")
    return True


_AT_EXIT: list = []


def main() -> None:
    global _STAGE
    _STAGE = Stage()
    if exit_at_once not in _AT_EXIT:  # registered last, run first: a signal while Python shuts down
        _AT_EXIT.append(exit_at_once)  # (other libraries' exit handlers) ends the process, no traceback
        atexit.register(exit_at_once)
    with early_stops():  # first: a signal during the checks ends her-run with one line, not killed by it
        try:
            return _main()
        except KeyboardInterrupt as exc:  # Stopped; a second Ctrl-C in training (signals.ABORTED); any other
            stop = exc
        exit_at_once()  # a further signal while this line is printed: exit at once, no traceback
        signum = getattr(stop, "signum", signal.SIGINT)
        _say(_STAGE.stopped_line(signum) if isinstance(stop, Stopped) else str(stop) or "interrupted")
        sys.exit(128 + signum)


THREADS_GRACE_S = 5.0  # how long threads left running after her-run's last line may take to end


def console() -> None:
    """The ``her-run`` console script: :func:`main`, then Python's own exit, which first joins every
    non-daemon thread (a pool's manager thread ends there), then runs the exit handlers. A thread a
    user's env or a library left running would keep her-run alive after its last line for ever: a
    watchdog gives the joins THREADS_GRACE_S, then says so in one line and ends the process."""
    try:
        code: object = main()
    except SystemExit as exc:
        code = exc.code
    joined = threading.Event()
    atexit.register(joined.set)  # registered last, run first: the exit handlers start once the joins ended
    threading.Thread(target=_exit_past_threads, args=(joined, code), name="her-run-exit", daemon=True).start()
    sys.exit(code)


def _exit_past_threads(joined: threading.Event, code: object) -> None:
    if joined.wait(THREADS_GRACE_S):
        return
    left = sorted({t.name for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()})
    _say(f"warning: {len(left)} thread{'s' if len(left) > 1 else ''} that the env or a library started still "
         f"ran {THREADS_GRACE_S:g} s after the end ({', '.join(left)}): her-run exits without waiting for "
         f"{'them' if len(left) > 1 else 'it'}")
    atexit._run_exitfuncs()  # what Python's exit would run next: other libraries' handlers
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


__all__ = ["console", "main", "objective", "optuna_settings"]
