"""``her-tune``: an Optuna study over her-run settings whose losing trials are stopped early.

Hydra's Optuna sweeper (``her-run -m hydra/sweeper=optuna``) runs every trial to its budget. Here each
trial is a plain ``her-run`` in a process of its own (``<study folder>/trial-<number>``); the tuner
follows the trial's ``metrics.jsonl`` as it grows and reports every evaluation to Optuna
(``trial.report(value, k)`` at the k-th evaluation, as RL-Zoo does), and when the pruner says so it
sends the trial SIGTERM: her-run ends at the end of its iteration with its checkpoint, and the trial
is marked pruned. A trial whose process fails or dies is one failed trial.

The search space is given in the Hydra Optuna sweeper's syntax and parsed by that plugin's own
function (``choice(...)``, ``range(...)``, ``interval(...)``, ``tag(log, interval(...))``); every other
override is passed to each trial as given. The study lives in an Optuna storage (SQLite in the study
folder by default, any Optuna RDB URL), so the same command continues it and several processes, on
one machine or a cluster, can share it; ``--trials`` counts the trials of the whole study.

Bad input (a tuner option, the search syntax, an override her-run would refuse, a storage URL Optuna
refuses) is one line ``her-tune: error: ...`` and exit status 2, with nothing written. Exit status 0:
the study has a best trial; 1: no trial completed, or three trials in a row failed; 128 + the signal
when stopped (the running trials are stopped with their checkpoints and do not count toward
``--trials``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from her_rl.config import checks
from her_rl.envs.families import import_given
from her_rl.errors import ConfigError, one_line, outside, printable, whole
from her_rl.folder import metrics as metrics_file
from her_rl.folder.atomic import write_atomic_text
from her_rl.folder.rundir import RESULTS, check_folder
from her_rl.rules import check_path

# Lazy imports in this file, tagged at each: `# lazy: Hydra`: her-tune starts without Hydra and OmegaConf (nor the
# her_rl modules that load them), so it takes its signals and answers --help at once; `# optional extra: tune`:
# optuna, SQLAlchemy, alembic and Hydra's Optuna sweeper (pip install 'her-rl[tune]').

PRUNERS = ("median", "percentile", "hyperband", "successive_halving", "none")
SAMPLERS = ("tpe", "random")
METRICS = ("auto", "success_rate", "return")
STUDY_FILE = "study.json"
DEFAULT_DIR = "tune"
POLL_S = 0.02  # how often the running trials' metrics are checked (a size check; read when they grew): a pruned
# trial gets its SIGTERM within about this long of the evaluation line that pruned it
STOP_WAIT_S = 60.0  # after SIGTERM, how long a trial may take to write its checkpoint and end (then SIGKILL)
FAILS_IN_A_ROW = 3  # this many trials of this command failing one after another end the study
HEARTBEAT_S = 30  # a running trial's heartbeat in the storage; a trial silent for GRACE_S is another's dead one
GRACE_S = 120
# keys her-tune sets for each trial, or that would make a trial something else than a training run
_OWN_KEYS = ("hydra.run.dir", "resume", "load", "video", "hydra.sweep", "hydra.sweeper", "hydra/sweeper",
             "hydra.launcher", "hydra/launcher", "hydra.mode")
# her-run with this Python (the same her-rl, whatever PATH holds)
HER_RUN = (sys.executable, "-c", "import sys; sys.argv[0] = 'her-run'; from her_rl.cli import console; console()")


def _say(text: object, stream=None) -> None:
    print(printable(f"her-tune: {text}"), file=stream or sys.stdout, flush=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, as every her-rl refusal
        raise ConfigError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="her-tune", description="An Optuna study over her-run settings; a pruner stops losing "
                "trials at their evaluations. OVERRIDES are her-run's, plus the search space in the Hydra "
                "Optuna sweeper's syntax: 'algo.lr=tag(log,interval(1e-4,1e-2))' algo.batch_size=choice(64,256).",
                allow_abbrev=False)
    p.add_argument("overrides", nargs="*", metavar="OVERRIDE")
    p.add_argument("--trials", metavar="N", type=int, default=20, help="trials of the whole study, those of earlier "
                   "commands and other processes included (default 20)")
    p.add_argument("--jobs", metavar="N", type=int, default=1, help="trials run at once by this command (default 1)")
    p.add_argument("--pruner", metavar="NAME", default="median", help=f"{', '.join(PRUNERS)} (default median)")
    p.add_argument("--startup-trials", metavar="N", type=int, default=5, help="median, percentile: completed trials before "
                   "any is pruned (default 5)")
    p.add_argument("--warmup-evals", metavar="N", type=int, default=0, help="evaluations of a trial before it may be pruned "
                   "(default 0; hyperband, successive_halving: the first rung is after this many + 1)")
    p.add_argument("--percentile", metavar="P", type=float, default=25.0, help="percentile: prune below this percentile "
                   "of the completed trials (default 25)")
    p.add_argument("--reduction-factor", metavar="N", type=int, default=3, help="hyperband, successive_halving (default 3)")
    p.add_argument("--sampler", metavar="NAME", default="tpe", help=f"{', '.join(SAMPLERS)} (default tpe)")
    p.add_argument("--seed", metavar="N", type=int, default=None, help="the sampler's seed (continuing a study: plus its "
                   "number of trials, so no draw repeats)")
    p.add_argument("--metric", metavar="NAME", default="auto", help="the eval metric reported and maximised: success_rate, "
                   "return, or auto (success rate on goal envs, else return)")
    p.add_argument("--dir", metavar="DIR", default=DEFAULT_DIR, help=f"the study folder: trial-<n>/ run folders, {STUDY_FILE} "
                   f"(default {DEFAULT_DIR})")
    p.add_argument("--storage", metavar="URL", default=None, help="an Optuna storage URL (default sqlite:///<dir>/study.db)")
    p.add_argument("--study-name", metavar="NAME", default=None, help="the study in the storage (default the folder's name)")
    return p


def _checked_options(args: argparse.Namespace) -> None:
    for name, low in (("trials", 1), ("jobs", 1), ("startup_trials", 0), ("warmup_evals", 0),
                      ("reduction_factor", 2)):
        if getattr(args, name) < low:
            raise ConfigError(f"--{name.replace('_', '-')}={getattr(args, name)}: must be an integer >= {low}")
    for name, allowed in (("pruner", PRUNERS), ("sampler", SAMPLERS), ("metric", METRICS)):
        if getattr(args, name) not in allowed:
            raise ConfigError(f"--{name}={getattr(args, name)} is unknown: one of {', '.join(allowed)}")
    if not 0.0 <= args.percentile <= 100.0:
        raise ConfigError(f"--percentile={args.percentile:g}: must be in [0, 100]")
    if args.seed is not None and not 0 <= args.seed < 2**31:
        raise ConfigError(f"--seed={args.seed}: must be in [0, 2**31 - 1]")
    for arg in args.overrides:
        key = arg.lstrip("+~").split("=", 1)[0]
        if any(key == own or key.startswith((own + ".", own + "/")) for own in _OWN_KEYS):
            raise ConfigError(f"{arg!r} is not accepted: her-tune runs each trial as a new training run in "
                              f"{args.dir}/trial-<n> (give the study folder with --dir)")


# ------------------------------------------------------------------------------------------------ search space

def search_space(overrides: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The overrides every trial gets as given, and the search space: key -> Optuna distribution, from the
    overrides in the Hydra Optuna sweeper's syntax (a comma list is a choice, as there)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # lazy: Hydra
    from hydra.errors import HydraException  # lazy: Hydra

    try:
        with warnings.catch_warnings():  # optuna 2.x on SQLAlchemy 2: declarative_base() moved
            warnings.simplefilter("ignore", DeprecationWarning)
            # optional extra: tune
            from hydra_plugins.hydra_optuna_sweeper._impl import create_optuna_distribution_from_override
    except ImportError:
        raise ConfigError("her-tune needs Optuna and Hydra's Optuna sweeper: pip install 'her-rl[tune]'") from None
    parser = OverridesParser.create()
    fixed, space = [], {}
    for line in overrides:
        try:
            override = parser.parse_overrides([line])[0]
            if not override.is_sweep_override():
                fixed.append(line)
                continue
            space[override.get_key_element()] = create_optuna_distribution_from_override(override)
        except (HydraException, AssertionError, ValueError, TypeError, NotImplementedError) as exc:
            why = one_line(exc) or "not a search space Optuna can sample"
            raise ConfigError(f"{line!r} is not a search space her-tune can use: {outside(why)}") from None
    return fixed, space


def _text(value: Any) -> str:
    """A sampled value as override text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return repr(value) if isinstance(value, float) else str(value)


def _overrides(params: dict[str, Any]) -> list[str]:
    return [f"{key}={_text(value)}" for key, value in params.items()]


def _corners(space: dict[str, Any]) -> list[dict[str, Any]]:
    """Values to check: every choice and both ends of every range, one key at a time."""
    from optuna.distributions import CategoricalDistribution  # optional extra: tune

    values = {k: list(d.choices) if isinstance(d, CategoricalDistribution) else [d.low, d.high]
              for k, d in space.items()}
    first = {k: v[0] for k, v in values.items()}
    return [first] + [{**first, key: v} for key, vs in values.items() for v in vs[1:]]


def check_runs(fixed: list[str], space: dict[str, Any]) -> str:
    """What her-run checks before a run (the overrides, the composed config, every value), for each
    choice and both ends of each range; returns the config's ``objective``."""
    from hydra.errors import HydraException  # lazy: Hydra
    from omegaconf import OmegaConf  # lazy: Hydra
    from omegaconf.errors import OmegaConfBaseException  # lazy: Hydra

    from her_rl.config.checks import validate  # lazy: Hydra
    from her_rl.config.compose import check_group_names, compose, hydra_message  # lazy: Hydra
    from her_rl.config.compose import one_value_each  # lazy: Hydra

    objective = "final_eval"
    for i, params in enumerate(_corners(space)):
        variant = [*fixed, *_overrides(params)]
        try:
            check_group_names(variant)
            if i == 0:
                import_given(one_value_each(variant))  # env.id=module:Env-v0 registers the env, as her-run does
            cfg = compose(variant)
            checks.check_required(OmegaConf.to_container(cfg), variant)
            validate(cfg, variant)
        except (HydraException, OmegaConfBaseException) as exc:
            raise ConfigError(hydra_message(exc, variant)) from None
        objective = str(cfg.get("objective", objective)) if i == 0 else objective
    return objective


# ---------------------------------------------------------------------------------------------- Optuna parts

def _pruner(args: argparse.Namespace):
    import optuna  # optional extra: tune

    warmup = args.warmup_evals + 1  # Optuna's steps are evaluation numbers 1, 2, ...; step < n_warmup_steps waits
    if args.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=args.startup_trials, n_warmup_steps=warmup)
    if args.pruner == "percentile":
        return optuna.pruners.PercentilePruner(args.percentile, n_startup_trials=args.startup_trials,
                                               n_warmup_steps=warmup)
    if args.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=warmup, reduction_factor=args.reduction_factor)
    if args.pruner == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=warmup, reduction_factor=args.reduction_factor)
    return optuna.pruners.NopPruner()


def _sampler(name: str, seed: int | None):
    import optuna  # optional extra: tune

    return optuna.samplers.RandomSampler(seed=seed) if name == "random" else optuna.samplers.TPESampler(seed=seed)


def _sqlalchemy2_fix() -> None:
    """Optuna 2.x (which Hydra's Optuna sweeper pins) stamps a new RDB storage's schema version on a
    connection it never commits; SQLAlchemy 2 does not commit it either, so the stamp is lost and the
    database stays locked. The two methods that do that, committing and closing their connection."""
    import alembic.migration  # optional extra: tune
    import optuna  # optional extra: tune
    import sqlalchemy  # optional extra: tune

    if int(optuna.__version__.split(".")[0]) >= 3 or int(sqlalchemy.__version__.split(".")[0]) < 2:
        return
    from optuna.storages._rdb import storage as rdb  # optional extra: tune

    def stamp(self, revision: str) -> None:
        with self.engine.begin() as conn:
            alembic.migration.MigrationContext.configure(conn).stamp(self._create_alembic_script(), revision)

    def current(self) -> str:
        with self.engine.connect() as conn:
            version = alembic.migration.MigrationContext.configure(conn).get_current_revision()
        assert version is not None
        return version

    rdb._VersionManager._set_alembic_revision = stamp
    rdb._VersionManager.get_current_version = current


def _hidden(url: str) -> str:
    """A storage URL as it may be printed and written: its password left out."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def check_storage(url: str) -> None:
    """A storage URL Optuna can open, refused before anything is written."""
    from sqlalchemy.engine import make_url  # optional extra: tune
    from sqlalchemy.exc import ArgumentError  # optional extra: tune

    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except (ArgumentError, ValueError, ImportError) as exc:  # malformed, an unknown dialect, a missing driver
        raise ConfigError(f"--storage={_hidden(url)}: Optuna cannot use it ({outside(one_line(exc))}); give "
                          "an RDB URL such as sqlite:///study.db or postgresql://user@host/db") from None


def open_study(url: str, name: str, sampler, pruner):
    """The study in the storage (created when new), with heartbeats where the storage keeps them."""
    import optuna  # optional extra: tune
    from optuna.exceptions import ExperimentalWarning  # optional extra: tune

    _sqlalchemy2_fix()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        warnings.simplefilter("ignore", DeprecationWarning)  # optuna 2.x's schema files on SQLAlchemy 2
        storage = optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
        study = optuna.create_study(storage=storage, study_name=name, sampler=sampler, pruner=pruner,
                                    direction="maximize", load_if_exists=True)
        optuna.storages.fail_stale_trials(study)  # RUNNING trials of a tuner that died
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise ConfigError(f"study {name} in {_hidden(url)} minimises; her-tune maximises: give another --study-name")
    return study


def _counts(trial) -> bool:
    """Whether a trial counts toward ``--trials``: it ended (complete, pruned, or failed as the tuner saw)
    or is running; a trial stopped because its tuner stopped (or died) does not."""
    state = trial.state.name
    return state in ("COMPLETE", "PRUNED", "RUNNING") or (state == "FAIL" and "error" in trial.user_attrs)


# ---------------------------------------------------------------------------------------------------- trials

class _Lines:
    """The complete lines appended to a file since the last call (the file may not exist yet)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.rest = path, 0, b""

    def new(self) -> list[dict[str, Any]]:
        try:
            if os.stat(self.path).st_size == self.offset:  # nothing new: the common case, polled often
                return []
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        out = []
        for line in lines:
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict) and type(value.get("step")) is int:
                    out.append(value)
        return out


class Trial:
    """One trial: its her-run process, the evaluations reported so far, how it ended."""

    def __init__(self, study, trial, folder: Path, command: list[str], metric: str):
        self.study, self.trial, self.folder, self.metric = study, trial, folder, metric
        self.lines = _Lines(folder / metrics_file.METRICS)
        self.evaluations: list[tuple[int, float]] = []  # (env step, value)
        self.last_step = 0
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.start = time.time()
        self.stop_sent: float | None = None
        self.pruned = False
        self.heartbeat = 0.0
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)  # Ctrl-C is the tuner's
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for raw in self.proc.stdout:
            self.tail.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _tag(self, line: dict[str, Any]) -> str | None:
        if self.metric != "auto":
            return f"eval/{self.metric}"
        return next((t for t in ("eval/success_rate", "eval/return") if t in line), None)

    def follow(self) -> None:
        """Report the new evaluations; stop the trial (SIGTERM) when the pruner says so."""
        running = self.proc.poll() is None
        for line in self.lines.new():
            self.last_step = max(self.last_step, line["step"])
            tag = self._tag(line)
            if tag is None or line.get(tag) is None:
                continue
            self.evaluations.append((line["step"], float(line[tag])))
            self.trial.report(float(line[tag]), len(self.evaluations))
            if running and self.stop_sent is None and self.trial.should_prune():
                self.pruned = True
                self.stop()
        if running and time.time() - self.heartbeat > HEARTBEAT_S:
            self.heartbeat = time.time()
            with contextlib.suppress(Exception):
                self.study._storage.record_heartbeat(self.trial._trial_id)
        if self.stop_sent is not None and running and time.time() - self.stop_sent > STOP_WAIT_S:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    def stop(self) -> None:
        if self.stop_sent is None and self.proc.poll() is None:
            self.stop_sent = time.time()
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)

    def done(self) -> bool:
        return self.proc.poll() is not None

    def finish(self, objective: str, interrupted: bool = False) -> str:
        """Tell the study how the trial ended; its state's name."""
        from optuna.trial import TrialState  # optional extra: tune

        from her_rl.run.sweep import objective as sweep_objective  # lazy: OmegaConf (run.sweep loads it)

        self.proc.wait()
        self.follow()  # the lines written before it ended
        code = self.proc.returncode
        results = _json(self.folder / RESULTS) if code == 0 else None
        attrs = {"folder": str(self.folder), "wall_s": round(time.time() - self.start, 3),
                 "env_steps": int(results["env_steps"]) if results else self.last_step,
                 "evaluations": self.evaluations, "exit_code": code}
        value = None
        if results is not None:
            if objective == "steps_to_solve":
                value = sweep_objective(results, objective)
            else:
                metric = self.metric if self.metric != "auto" else \
                    "success_rate" if "eval_success_rate" in results else "return"
                value = results.get(f"eval_{metric}")
        if interrupted and results is None:
            attrs["interrupted"] = True
            state = TrialState.FAIL
        elif value is not None and math.isfinite(float(value)):
            state = TrialState.COMPLETE
        elif self.pruned and code in (128 + signal.SIGTERM, -signal.SIGTERM, -signal.SIGKILL):
            state = TrialState.PRUNED
        else:
            lines = [line for line in self.tail if line.strip()]
            said = next((line for line in reversed(lines) if "error" in line), lines[-1] if lines else "")
            attrs["error"] = one_line(said) or f"her-run exited with status {code}"
            state = TrialState.FAIL
        for key, item in attrs.items():
            self.trial.set_user_attr(key, item)
        self.study.tell(self.trial, float(value) if state == TrialState.COMPLETE else None, state=state)
        return state.name


def _json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


# ------------------------------------------------------------------------------------------------- the study

def _study_made(name: str) -> bool:
    """A file or folder her-tune makes in a study folder: the SQLite study and its journals, a trial."""
    return name.startswith("study.db") or re.fullmatch(r"trial-\d+", name) is not None


def _check_folder(folder: Path, name: str) -> None:
    """A study folder that is new, empty, or this study's."""
    if folder.is_symlink():
        raise ConfigError(f"cannot use study folder {folder}: it is a link; give the folder it points to")
    check_folder(folder, "study folder", lambda f, ignore=(): True)  # a folder that can be made and written in
    if folder.exists() and any(folder.iterdir()):
        held = _json(folder / STUDY_FILE)
        if held is None and all(_study_made(p.name) for p in folder.iterdir()):
            return  # another her-tune of this study, started at the same moment, has not written study.json yet
        if held is None:
            raise ConfigError(f"study folder {folder} already holds other files than a her-tune study "
                              f"({STUDY_FILE}); pick a new or empty folder")
        if held.get("study") != name:
            raise ConfigError(f"study folder {folder} holds study {held.get('study')}, not {name}: a folder "
                              "holds one study (give another --dir, or its --study-name)")


def _check_same(study, command: dict[str, Any]) -> None:
    """A study continued with the overrides, search space and metric it was started with."""
    held = study.user_attrs.get("her_tune")
    if held is None:
        study.set_user_attr("her_tune", command)
    elif held != command:
        changed = [k for k in command if held.get(k) != command[k]]
        raise ConfigError(f"study {study.study_name} was started with other {' and '.join(changed)} "
                          f"({held}); continue it with the same, or give another --study-name and --dir")


def report(study, folder: Path, url: str, command: dict[str, Any], wall_s: float | None = None) -> dict:
    """Every trial of the study, as ``study.json`` holds it."""
    trials = []
    for t in study.get_trials(deepcopy=False):
        attrs = t.user_attrs
        trials.append({"number": t.number, "state": t.state.name, "value": t.value, "params": t.params,
                       "env_steps": attrs.get("env_steps"), "wall_s": attrs.get("wall_s"),
                       "evaluations": attrs.get("evaluations", []), "folder": attrs.get("folder"),
                       **{k: attrs[k] for k in ("error", "interrupted", "exit_code") if k in attrs}})
    done = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    best = max(done, key=lambda t: t.value) if done else None
    count = collections.Counter(t["state"].lower() for t in trials)
    return {"study": study.study_name, "storage": _hidden(url), "direction": "maximize", **command,
            "trials_counted": sum(map(_counts, study.get_trials(deepcopy=False))),
            "complete": count["complete"], "pruned": count["pruned"], "failed": count["fail"],
            "running": count["running"], "env_steps": sum(t["env_steps"] or 0 for t in trials),
            "trials_wall_s": round(sum(t["wall_s"] or 0.0 for t in trials), 3),
            "wall_s": None if wall_s is None else round(wall_s, 3),
            "best": None if best is None else {"number": best.number, "value": best.value, "params": best.params,
                                               "her_run": best_line(command["overrides"], best.params)},
            "trials": trials}


def best_line(fixed: list[str], params: dict[str, Any]) -> str:
    return shlex.join(["her-run", *fixed, *_overrides(params)])


def _write(folder: Path, data: dict) -> None:
    try:
        write_atomic_text(folder / STUDY_FILE, json.dumps(data, indent=1, default=str) + "\n")
    except OSError as exc:
        _say(f"warning: cannot write {folder / STUDY_FILE}: {exc.strerror or exc}", sys.stderr)


class _Stop:
    """SIGINT, SIGTERM, SIGHUP: stop the running trials and end (a second one: kill them and end at once)."""

    def __init__(self):
        self.signum: int | None = None
        self.procs: list[subprocess.Popen] = []
        self.previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                self.previous[sig] = signal.signal(sig, self._note)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def _note(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            for proc in self.procs:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            os._exit(128 + signum)
        self.signum = signum


def run_study(args: argparse.Namespace, fixed: list[str], space: dict[str, Any], objective: str) -> int:
    stop = _Stop()
    try:
        return _run_study(args, fixed, space, objective, stop)
    finally:
        stop.restore()


def _run_study(args: argparse.Namespace, fixed: list[str], space: dict[str, Any], objective: str,
               stop: _Stop) -> int:
    folder = Path(args.dir)
    name = args.study_name or folder.absolute().name
    url = args.storage or f"sqlite:///{folder.absolute() / 'study.db'}"
    command = {"overrides": fixed, "search_space": {k: repr(d) for k, d in space.items()}, "metric": args.metric,
               "objective": objective}
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        study = open_study(url, name, None, _pruner(args))
        _check_same(study, command)
    except Exception as exc:
        if made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"--storage={_hidden(url)}: Optuna cannot open the study ({outside(one_line(exc))})") \
            from None
    seed = None if args.seed is None else args.seed + len(study.get_trials(deepcopy=False))
    study.sampler = _sampler(args.sampler, seed)
    started = time.time()
    _write(folder, report(study, folder, url, command))
    _say(f"study {name} in {_hidden(url)}: {sum(map(_counts, study.trials))} of {args.trials} trials so far; "
         f"pruner {args.pruner}, sampler {args.sampler}")
    running: list[Trial] = []
    fails = 0
    while True:
        for t in list(running):
            t.follow()
            if t.done():
                running.remove(t)
                state = t.finish(objective)
                fails = fails + 1 if state == "FAIL" else 0
                _say(_trial_line(t, state))
                _write(folder, report(study, folder, url, command, time.time() - started))
        if stop.signum is not None or fails >= FAILS_IN_A_ROW:
            break
        if len(running) < args.jobs:
            counted = sum(map(_counts, study.get_trials(deepcopy=False)))
            for _ in range(min(args.jobs - len(running), args.trials - counted)):
                trial = study.ask(space)
                out = folder.absolute() / f"trial-{trial.number}"
                cmd = [*HER_RUN, "progress=false", *fixed, *_overrides(trial.params), f"hydra.run.dir={_quoted(out)}"]
                running.append(Trial(study, trial, out, cmd, args.metric))
                stop.procs.append(running[-1].proc)
        if not running:
            break
        time.sleep(POLL_S)
    for t in running:  # a signal, or too many failures: the running trials end with their checkpoints
        t.stop()
    for t in running:
        while not t.done():
            t.follow()
            time.sleep(POLL_S)
        _say(_trial_line(t, t.finish(objective, interrupted=True)))
    data = report(study, folder, url, command, time.time() - started)
    _write(folder, data)
    _summary(data, folder)
    if stop.signum is not None:
        _say(f"stopped by signal {stop.signum}: the stopped trials do not count toward --trials; the same command "
             "continues the study", sys.stderr)
        return 128 + stop.signum
    if fails >= FAILS_IN_A_ROW:
        _say(f"error: {FAILS_IN_A_ROW} trials in a row failed, the last with: "
             f"{outside(data['trials'][-1].get('error', '?'))}", sys.stderr)
        return 1
    return 0 if data["best"] else 1


def _quoted(path: Path) -> str:
    """A folder as a Hydra override value."""
    text = str(path)
    if re.fullmatch(r"[\w./+@-]+", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _trial_line(t: Trial, state: str) -> str:
    last = f", last eval {t.evaluations[-1][1]:g}" if t.evaluations else ""
    at = f" at evaluation {len(t.evaluations)}" if state == "PRUNED" else ""
    error = f": {outside(t.trial.user_attrs.get('error', ''))}" if state == "FAIL" else ""
    return (f"trial {t.trial.number} {state.lower()}{at} ({t.last_step:,} env steps, "
            f"{time.time() - t.start:.1f} s{last}) {' '.join(_overrides(t.trial.params))}{error}")


def _summary(data: dict, folder: Path) -> None:
    _say(f"{data['trials_counted']} trials: {data['complete']} complete, {data['pruned']} pruned, "
         f"{data['failed']} failed; {data['env_steps']:,} env steps in all; this command {data['wall_s']:.0f} s")
    best = data["best"]
    if best is None:
        _say("no trial completed: the study has no best trial yet", sys.stderr)
    else:
        _say(f"best: trial {best['number']}, {best['value']:g} ({data['metric']} metric, objective "
             f"{data['objective']}); run it with:")
        print(whole(best["her_run"]), flush=True)
    _say(f"wrote {whole(str(folder / STUDY_FILE))}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(argv)
        _checked_options(args)
        from her_rl.config.compose import check_overrides  # lazy: Hydra

        check_path("--dir", args.dir)
        check_overrides(args.overrides)
        fixed, space = search_space(args.overrides)
        if not space:
            raise ConfigError("no search space: give at least one key to search, such as "
                              "'algo.lr=tag(log,interval(1e-4,1e-2))' or algo.batch_size=choice(64,256)")
        objective = check_runs(fixed, space)
        if args.storage is not None:
            check_storage(args.storage)
        _check_folder(Path(args.dir), args.study_name or Path(args.dir).absolute().name)
        return run_study(args, fixed, space, objective)
    except ConfigError as exc:
        _say(f"error: {exc}", sys.stderr)
        return 2


def console() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console()
