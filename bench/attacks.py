"""The adversarial corpus of issue 54: attacks on run folders mid-run, user envs, launchers, sweepers and
foreign run folders, each run in a sandbox of its own and held to five rules at once:

* **writes**: nothing written outside the her-rl run folders the attack names: the sandbox's tree
  (paths, kinds, sizes, modification times, link targets) is compared before and after, and a
  decoy folder beside the sandbox (a user's notes, config, model and ``tb/``, which the attacks
  link to) must stay byte for byte as it was;
* **traceback**: no ``Traceback`` in what the command printed (stdout and stderr);
* **hang**: the command ended within its time, and left no thread that would keep Python from
  exiting (the child joins its non-daemon threads as the interpreter does at exit, for a few seconds);
* **import**: no foreign module imported: sentinel modules (``evilmod`` in the current folder and in
  the run folders, named by the foreign configs and checkpoints; modules named like the libraries
  her-rl imports late, ``matplotlib``, ``imageio``, ...) each leave a marker file when imported;
* **exit code**: the exit status is one the docs name for that command (the table of
  ``docs/cli.md``, ``docs/sweeps.md`` for a sweep and for ``her-summary``).

Each attack also says the exit status and the words it should end with (:attr:`Attack.expect`,
:attr:`Attack.says`). ``tests/test_adversarial.py`` runs every attack as a test and
``scripts/attack_corpus.py`` counts the rules per category. Both run her-run and her-summary as a
forked child of a process that has imported them already (the imports are paid once, and what an
attack does to its process, a ``chdir``, ``os.environ``, threads, ``sys.path``, stays in the child);
a hook (a mid-run tamper, say) is applied in the child before the command starts.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
CATEGORIES = ("run folder mid-run", "user env", "launcher", "sweeper", "foreign folder")
RULES = ("writes", "traceback", "hang", "import", "exit_code")
TIMEOUT_S = 120.0  # a command still running after this is a hang (a tiny run takes about a second)
EXIT_WAIT_S = 8.0  # how long the child waits for a non-daemon thread at exit before it counts as a hang (her-run itself leaves after 5 s)
SHADOWED = ("matplotlib", "imageio", "imageio_ffmpeg", "optuna", "psutil", "scipy", "pandas", "submitit")
"""Libraries her-rl (or Hydra's plugins) import late: a module of that name in the user's folder must
never be the one imported."""

SMALL = ["algo=her_dqn", "env=bitflip", "n=4", "progress=false", "eval.episodes=5"]
TINY = [*SMALL, "algo.hidden=[8]", "algo.buffer_size=64", "algo.batch_size=8"]
PPO = ["algo=ppo", "progress=false", "eval.episodes=2", "budget.env_steps=64"]
HER = ["algo=her_dqn", "progress=false", "eval.episodes=2", "budget.env_steps=300", "checkpoint.every_s=0",
       "algo.hidden=[8]", "algo.batch_size=8"]
SWEEP = ["-m", *SMALL, "seed=0,1", "budget.env_steps=50"]

# ---- the user's env module: a well-behaved env and a goal env, each subclass breaks one thing ----

USER_ENVS = '''
import os
import threading

import gymnasium as gym
import numpy as np
from gymnasium import spaces

STEPS = [0]


def later():  # past FAULT_AFTER env steps of this process (unset: at once)
    return STEPS[0] > int(os.environ.get("FAULT_AFTER", "0"))


class Boom(BaseException):  # not an Exception: what an env raises may be anything
    pass


class Line(gym.Env):
    def __init__(self):
        self.observation_space = spaces.Box(0, 10, (2,), np.float32)
        self.action_space = spaces.Discrete(2)

    def obs(self):
        return np.array([self.t, 1.0], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs(), {}

    def step(self, action):
        self.t += 1
        STEPS[0] += 1
        return self.obs(), 1.0, self.t >= 5, False, {}


class StepGeneratorExit(Line):
    def step(self, action):
        if later():
            raise GeneratorExit("the simulator's generator closed")
        return super().step(action)


class CloseGeneratorExit(Line):
    def close(self):
        raise GeneratorExit()


class StepBoom(Line):
    def step(self, action):
        if later():
            raise Boom("a BaseException of the env's own")
        return super().step(action)


class CloseBoom(Line):
    def close(self):
        raise Boom("cannot release the device")


class StringsLater(Line):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return (np.array(["a", "b"]) if later() else obs), reward, terminated, truncated, info


class ShapeLater(Line):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return (np.zeros(7, np.float32) if later() else obs), reward, terminated, truncated, info


class TerminatedArrayLater(Line):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, (np.array([1, 2]) if later() else terminated), truncated, info


class LeavesAThread(Line):  # a non-daemon thread that never ends: Python waits for it at exit
    def __init__(self):
        super().__init__()
        threading.Thread(target=threading.Event().wait, name="env-poller", daemon=False).start()


class ChangesFolder(Line):  # moves the process into the decoy folder mid-run
    def step(self, action):
        if later():
            os.chdir(os.environ["DECOY"])
        return super().step(action)


class ChangesEnviron(Line):
    def __init__(self):
        super().__init__()
        os.environ.update(HYDRA_FULL_ERROR="1", COLUMNS="3", PYTHONWARNINGS="error", TORCH_SHOW_CPP_STACKTRACES="1")
        os.environ.pop("PATH", None)

    def step(self, action):
        if later():
            raise ValueError("after changing the environment")
        return super().step(action)


class Goal(gym.Env):
    def __init__(self):
        cell = spaces.Box(0, 3, (2,), np.float32)
        self.observation_space = spaces.Dict(observation=cell, achieved_goal=cell, desired_goal=cell)
        self.action_space = spaces.Discrete(4)

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)

    def obs(self):
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy()}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.goal = self.np_random.integers(0, 4, (2, 2)).astype(np.float32)
        return self.obs(), {}

    def step(self, action):
        STEPS[0] += 1
        move = np.eye(2, dtype=np.float32)[int(action) % 2] * (1 - int(action) // 2 * 2)
        self.pos = np.clip(self.pos + move, 0, 3)
        reward = float(self.compute_reward(self.pos, self.goal, None))
        return self.obs(), reward, False, False, {"is_success": reward == 0}


class RewardExitsLater(Goal):  # sys.exit() from compute_reward once training relabels
    def compute_reward(self, achieved_goal, desired_goal, info):
        if np.ndim(achieved_goal) > 1 and later():
            raise SystemExit(0)
        return super().compute_reward(achieved_goal, desired_goal, info)


class RewardStringsLater(Goal):
    def compute_reward(self, achieved_goal, desired_goal, info):
        rewards = super().compute_reward(achieved_goal, desired_goal, info)
        return rewards.astype(str) if np.ndim(achieved_goal) > 1 and later() else rewards


class SuccessArrayLater(Goal):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, ({"is_success": np.array([1, 2, 3])} if later() else info)


for cls in list(globals().values()):
    if isinstance(cls, type) and issubclass(cls, gym.Env) and cls is not gym.Env:
        gym.register(id=f"{cls.__name__}-v0", entry_point=cls, max_episode_steps=8)
'''

SENTINEL = '''import os
open(os.path.join({markers!r}, __name__), "w").write("imported")
raise ImportError("sentinel module {{}} imported".format(__name__))
'''


# ---- the sandbox ----------------------------------------------------------------------------------

@dataclass
class Sandbox:
    """``root``: the attack's own tree, snapshotted (``work`` in it is the current folder);
    ``decoy``: a user's folder beside it, compared byte for byte; ``markers``: where sentinels write;
    ``template``: a finished her-rl run folder to copy."""

    root: Path
    decoy: Path
    markers: Path
    template: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @classmethod
    def make(cls, base: Path, template: Path) -> "Sandbox":
        sb = cls(base / "sandbox", base / "decoy", base / "markers", Path(template))
        for folder in (sb.work, sb.decoy / "tb", sb.markers):
            folder.mkdir(parents=True)
        (sb.decoy / "notes.txt").write_text("my notes\n")
        (sb.decoy / "config.yaml").write_text("mine: true\n")
        (sb.decoy / "results.json").write_text('{"mine": 1}\n')
        shutil.copy(sb.template / "checkpoint.pt", sb.decoy / "model.pt")
        (sb.work / "userenvs.py").write_text(USER_ENVS)
        for name in ("evilmod", *SHADOWED):
            (sb.work / f"{name}.py").write_text(SENTINEL.format(markers=str(sb.markers)))
        return sb

    def run_copy(self, name: str, *, checkpoint: bool = True) -> Path:
        """A copy of the finished run at ``root/name`` (an ``evilmod.py`` sentinel in it); without
        ``checkpoint``, as a run that stopped before its first checkpoint."""
        folder = self.root / name
        shutil.copytree(self.template, folder)
        (folder / "evilmod.py").write_text(SENTINEL.format(markers=str(self.markers)))
        if not checkpoint:
            for gone in ("checkpoint.pt", "results.json"):
                (folder / gone).unlink(missing_ok=True)
        return folder

    def sweep_of_copies(self, name: str, jobs: int = 2) -> Path:
        sweep = self.root / name
        sweep.mkdir()
        (sweep / "multirun.yaml").write_text("hydra: {}\n")
        for i in range(jobs):
            shutil.copytree(self.template, sweep / str(i))
        return sweep


def snapshot(folder: Path, hashes: bool = False) -> dict[str, tuple]:
    """Every path below ``folder``, links not followed: (kind, size, mtime_ns, link target) for files,
    the kind for folders; with ``hashes`` a regular file's sha256 too."""
    out: dict[str, tuple] = {}
    for base, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            path = os.path.join(base, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir",)
            elif hashes and os.path.isfile(path):
                out[rel] = ("file", st.st_size, st.st_mtime_ns, hashlib.sha256(Path(path).read_bytes()).hexdigest())
            else:
                out[rel] = (oct(st.st_mode), st.st_size, st.st_mtime_ns)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(base, d))]
    return out


def writes_outside(before: dict, after: dict, allowed: list[str]) -> list[str]:
    """Paths added, removed or changed that lie outside the ``allowed`` folders (relative paths)."""
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    inside = tuple(a.rstrip("/") for a in allowed)
    return [p for p in changed if not any(p == a or p.startswith(a + "/") for a in inside)]


# ---- the exit codes the docs name -----------------------------------------------------------------

def documented_exit_codes(docs: Path = ROOT / "docs") -> dict[str, set[int]]:
    """``her-run``: the rows of the exit status table of docs/cli.md (128+N: every signal);
    ``sweep``: those and the statuses docs/sweeps.md gives a sweep whose jobs failed;
    ``her-summary``: the list on docs/sweeps.md."""
    cli = (docs / "cli.md").read_text()
    table = cli.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    run: set[int] = set()
    for cell in re.findall(r"^\| *([0-9+N]+) *\|", table, flags=re.M):
        run |= set(range(129, 128 + 65)) if cell == "128+N" else {int(cell)}
    sweeps = (docs / "sweeps.md").read_text()
    failing = sweeps.split("## When a job fails", 1)[1].split("\n## ", 1)[0]
    sweep = run | {int(a or b) for a, b in re.findall(r"exit status (\d+)|, else (\d+)", failing)}
    summary_part = sweeps.split("Exit status of `her-summary`", 1)[1].split("\n\n", 2)[1]
    summary = {int(c) for c in re.findall(r"^- \*\*(\d+)\*\*", summary_part, flags=re.M)}
    return {"her-run": run, "sweep": sweep, "her-summary": summary}


# ---- running a command as a forked child ----------------------------------------------------------

_SCRIPTS = {ep.name: ep for ep in entry_points(group="console_scripts") if ep.value.startswith("her_rl.")}


def warm() -> None:
    """Import what her-run and her-summary import, once per process, before any fork."""
    import torch
    import torch._dynamo  # noqa: F401  (torch.optim imports it on an optimiser's first use)

    for ep in _SCRIPTS.values():
        ep.load()
    import her_rl.run.runner  # noqa: F401

    torch.set_num_threads(1)


@dataclass
class Outcome:
    code: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    seconds: float
    hung: str | None = None  # why it counts as a hang


def _child(argv, cwd, env, out_fd, err_fd, status_fd, hook, exit_wait):
    code = 1
    try:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(argv)
        from hydra.core.global_hydra import GlobalHydra

        GlobalHydra.instance().clear()
        try:
            if hook is not None:
                hook()
            status = _SCRIPTS[argv[0]].load()()
            raise SystemExit(status)  # what the console-script wrapper does: sys.exit(main())
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except BaseException:  # an uncaught exception: Python prints its traceback (a Ctrl-C: 130)
            traceback.print_exc()
            code = 130 if isinstance(sys.exc_info()[1], KeyboardInterrupt) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        deadline = time.monotonic() + exit_wait  # Python's exit waits for every non-daemon thread
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join(max(0.0, deadline - time.monotonic()))
        left = sorted({t.name for t in threading.enumerate()
                       if t is not threading.current_thread() and not t.daemon and t.is_alive()})
        if left:
            os.write(status_fd, ("threads " + ", ".join(left)).encode())
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def run_forked(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = TIMEOUT_S,
               hook: Callable[[], None] | None = None, exit_wait: float = EXIT_WAIT_S) -> Outcome:
    """``argv`` (``her-run ...`` or ``her-summary ...``) as a forked child: ``main()`` of the console
    script in ``cwd`` with ``env``, after ``hook()``; killed after ``timeout`` seconds."""
    warm()
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", **(env or {})}
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(argv, str(cwd), env, out.fileno(), err.fileno(), write_fd, hook, exit_wait)
    os.close(write_fd)
    hung, status = None, None
    while status is None:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            status = wait_status
        elif time.monotonic() - start > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            hung = f"still running after {timeout:.0f} s"
            break
        else:
            time.sleep(0.02)
    seconds = time.monotonic() - start
    os.set_blocking(read_fd, False)
    try:
        left = os.read(read_fd, 4096).decode()
    except BlockingIOError:
        left = ""
    os.close(read_fd)
    if left and hung is None:
        hung = f"{left} still running {exit_wait:.0f} s after the command ended: Python would wait for them at exit"
    code = None
    if status is not None:
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell reports it
    texts = []
    for f in (out, err):
        f.seek(0)
        texts.append(f.read().decode("utf-8", "replace"))
        f.close()
    return Outcome(code, texts[0], texts[1], seconds, hung)


# ---- the attacks ----------------------------------------------------------------------------------

@dataclass
class Setup:
    """What an attack's ``prepare`` returns: the command (``her-run`` or ``her-summary`` first, ``{root}``
    for the sandbox), the run folders it may write in (relative to the sandbox), a hook applied in the
    child before the command, extra environment."""

    argv: list[str]
    writes: list[str] = field(default_factory=list)
    hook: Callable[[], None] | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Attack:
    name: str
    category: str
    prepare: Callable[[Sandbox], Setup]
    expect: int  # the exit status it should end with
    says: str = ""  # words its output should hold
    defect: str | None = None  # a known defect, left open (the test is xfail(strict=True) with this reason)

    def __post_init__(self):
        assert self.category in CATEGORIES, self.category


@dataclass
class Result:
    attack: Attack
    outcome: Outcome
    broken: dict[str, str]  # rule -> what broke it (empty: every rule held)
    expected: str | None  # None: the exit status and words the attack expects; else what differed

    @property
    def clean(self) -> bool:
        return not self.broken and self.expected is None


def command_kind(argv: list[str]) -> str:
    return "her-summary" if argv[0] == "her-summary" else "sweep" if "-m" in argv else "her-run"


def run_attack(attack: Attack, base: Path, template: Path, codes: dict[str, set[int]] | None = None,
               timeout: float = TIMEOUT_S, exit_wait: float = EXIT_WAIT_S) -> Result:
    """Run ``attack`` in a new sandbox under ``base`` (an empty folder) and judge it by the five rules."""
    codes = codes or documented_exit_codes()
    sb = Sandbox.make(base, template)
    setup = attack.prepare(sb)
    argv = [a.replace("{root}", str(sb.root)) for a in setup.argv]
    env = {"DECOY": str(sb.decoy), **setup.env}
    before, decoy = snapshot(sb.root), snapshot(sb.decoy, hashes=True)
    outcome = run_forked(argv, sb.work, env=env, timeout=timeout, hook=setup.hook, exit_wait=exit_wait)
    broken: dict[str, str] = {}
    outside = writes_outside(before, snapshot(sb.root), setup.writes)
    if snapshot(sb.decoy, hashes=True) != decoy:
        outside.append(f"the decoy folder {sb.decoy}")
    if outside:
        broken["writes"] = ", ".join(outside[:5])
    printed = outcome.stdout + outcome.stderr
    if "Traceback" in printed:
        broken["traceback"] = printed[printed.index("Traceback"):][-600:]
    if outcome.hung:
        broken["hang"] = outcome.hung
    imported = sorted(p.name for p in sb.markers.iterdir())
    if imported:
        broken["import"] = ", ".join(imported)
    kind = command_kind(argv)
    if outcome.code is not None and outcome.code not in codes[kind]:
        broken["exit_code"] = f"{outcome.code} is not an exit status the docs name for {kind}"
    expected = None
    if outcome.code != attack.expect or attack.says not in printed:
        expected = f"exit {outcome.code} (expected {attack.expect}); output: {printed.strip()[-400:]!r}"
    return Result(attack, outcome, broken, expected)


# -- hooks: tampering with the run folder from inside the run, at its k-th checkpoint

def at_checkpoint(k: int, tamper: Callable[[Path], None]) -> Callable[[], None]:
    """A hook: ``tamper(run folder)`` just before the run's ``k``-th checkpoint write."""
    def hook() -> None:
        from her_rl.run.trainer import Trainer

        save, calls = Trainer.save, [0]

        def tampered(self, final=False):
            calls[0] += 1
            if calls[0] == k:
                tamper(Path(self.plan.out).absolute())
            return save(self, final)

        Trainer.save = tampered
    return hook


def _replace_by_folder(name: str, away: str) -> Callable[[Path], None]:
    def tamper(run: Path) -> None:
        target = run / name if name else run
        target.rename(run.parent / away)
        target.mkdir()
    return tamper


def _replace_by_link(name: str, to: Callable[[Path], Path]) -> Callable[[Path], None]:
    def tamper(run: Path) -> None:
        path = run / name
        if path.exists() or path.is_symlink():
            path.unlink()
        path.symlink_to(to(run))
    return tamper


def _decoy(name: str) -> Callable[[Path], Path]:
    return lambda run: Path(os.environ["DECOY"]) / name


def _make_dir(name: str) -> Callable[[Path], None]:
    def tamper(run: Path) -> None:
        (run / name).unlink()
        (run / name).mkdir()
    return tamper


def _midrun(name: str, tamper: Callable[[Path], None], expect: int, says: str = "", moved: str | None = None) -> Attack:
    def prepare(sb: Sandbox) -> Setup:
        args = [*TINY, "eval.episodes=2", "budget.env_steps=150", "checkpoint.every_s=0", "eval.every_env_steps=100",
                "hydra.run.dir={root}/run"]
        return Setup(["her-run", *args], ["run", *([moved] if moved else [])], at_checkpoint(2, tamper))
    return Attack(name, "run folder mid-run", prepare, expect, says)


MIDRUN = [
    _midrun("run folder moved away, a new empty folder in its place", _replace_by_folder("", "moved"), 5,
            "was moved to", moved="moved"),
    _midrun("tb/ moved away, a new empty folder in its place", _replace_by_folder("tb", "moved-tb"), 5,
            "its TensorBoard folder", moved="moved-tb"),
    _midrun("lock file deleted", lambda run: (run / ".her-run.lock").unlink(), 5, "during the run"),
    _midrun("lock file replaced by a link to the user's notes", _replace_by_link(".her-run.lock", _decoy("notes.txt")),
            5, "during the run"),
    _midrun("metrics.jsonl replaced by a link to the user's notes",
            _replace_by_link("metrics.jsonl", _decoy("notes.txt")), 0, "->"),
    _midrun("history.jsonl replaced by a link to the user's notes",
            _replace_by_link("history.jsonl", _decoy("notes.txt")), 0, "->"),
    _midrun("results.json made a link to the user's results", _replace_by_link("results.json", _decoy("results.json")),
            0, "->"),
    _midrun("checkpoint.pt replaced by a folder", _make_dir("checkpoint.pt"), 5,
            "could not write the final checkpoint"),
]


# -- user envs: a module of the user's own, named on the command line

def _env(name: str, cls: str, args: list[str], expect: int, says: str = "", after: int | None = 100,
         relative: bool = False, defect: str | None = None, plant: dict[str, str] | None = None,
         hook: Callable[[], None] | None = None) -> Attack:
    def prepare(sb: Sandbox) -> Setup:
        for where, text in (plant or {}).items():  # files put beside the user's module ("sentinel": one)
            (sb.work / where).parent.mkdir(parents=True, exist_ok=True)
            (sb.work / where).write_text(SENTINEL.format(markers=str(sb.markers)) if text == "sentinel" else text)
        run = "run" if relative else "{root}/run"
        extra = {} if after is None else {"FAULT_AFTER": str(after)}
        return Setup(["her-run", "env=gym", f"env.id=userenvs:{cls}-v0", *args, f"hydra.run.dir={run}"],
                     ["work/run" if relative else "run"], hook=hook, env=extra)
    return Attack(name, "user env", prepare, expect, says, defect)


def fresh_plugins() -> None:
    """A hook: Hydra scans its plugins again, as in a fresh her-run (a forked child inherits the scan)."""
    from hydra.core.plugins import Plugins
    from hydra.core.singleton import Singleton

    Singleton._instances.pop(Plugins, None)


def _module(name: str, body: str, says: str) -> Attack:
    def prepare(sb: Sandbox) -> Setup:
        (sb.work / "usermod.py").write_text(body)
        return Setup(["her-run", "env=gym", "env.id=usermod:X-v0", *PPO, "hydra.run.dir={root}/run"], [])
    return Attack(name, "user env", prepare, 2, says)


LATER = ["algo=ppo", "progress=false", "eval.episodes=2", "budget.env_steps=2000", "checkpoint.every_s=0"]
USER_ENV = [
    _env("step raises GeneratorExit mid-training", "StepGeneratorExit", LATER, 4, "step raised GeneratorExit"),
    _env("close raises GeneratorExit", "CloseGeneratorExit", PPO, 2, "close raised GeneratorExit"),
    _env("step raises a BaseException of its own mid-training", "StepBoom", LATER, 4, "step raised Boom"),
    _env("close raises a BaseException of its own", "CloseBoom", PPO, 2, "close raised Boom"),
    _module("module exits at import (sys.exit(0))", "raise SystemExit(0)\n", "importing module 'usermod' failed"),
    _module("module raises a BaseException at import",
            "class Boom(BaseException):\n    pass\n\n\nraise Boom('no licence')\n", "Boom: no licence"),
    _env("observation of strings mid-episode", "StringsLater", LATER, 4, "step raised"),
    _env("observation of another shape mid-episode", "ShapeLater", LATER, 4, "step raised"),
    _env("terminated an array mid-episode", "TerminatedArrayLater", LATER, 4, "step raised"),
    _env("compute_reward calls sys.exit once training relabels", "RewardExitsLater", HER, 4,
         "compute_reward raised SystemExit"),
    _env("compute_reward returns strings mid-training", "RewardStringsLater", HER, 4, "dtype <U"),
    _env("is_success an array mid-episode", "SuccessArrayLater", HER, 4, "step raised"),
    _env("env leaves a non-daemon thread running", "LeavesAThread", PPO, 0, "still ran 5 s after the end (env-poller)",
         after=None),
    _env("a hydra_plugins folder beside the user's env module", "Line", PPO, 0, "->", after=None,
         plant={"hydra_plugins/evil_plugin/__init__.py": "sentinel"}, hook=fresh_plugins),
    _env("env changes the current folder into the user's folder mid-run", "ChangesFolder", LATER, 5,
         "during the run", relative=True),
    _env("env rewrites os.environ (HYDRA_FULL_ERROR, COLUMNS, PATH) and raises", "ChangesEnviron", LATER, 4,
         "step raised ValueError"),
]


# -- launchers and sweepers: their settings, of the wrong type, negative, huge

def _sweep(name: str, category: str, setting: str, says: str, expect: int = 2, writes: list[str] | None = None,
           env_id: str | None = None) -> Attack:
    def prepare(sb: Sandbox) -> Setup:
        env = ["env=gym", f"env.id={env_id}", *PPO[:3], "budget.env_steps=64"] if env_id else []
        base = [*SWEEP, *env] if not env_id else ["-m", *env, "seed=0,1"]
        return Setup(["her-run", *base, *setting.split(), "hydra.sweep.dir={root}/sweep"], writes or ["sweep"])
    return Attack(name, category, prepare, expect, says)


LAUNCHER = [
    _sweep("joblib n_jobs huge", "launcher", "hydra/launcher=joblib hydra.launcher.n_jobs=1000000000000",
           "hydra.launcher.n_jobs must be"),
    _sweep("joblib n_jobs a boolean", "launcher", "hydra/launcher=joblib hydra.launcher.n_jobs=true", "n_jobs"),
    _sweep("joblib batch_size negative", "launcher", "hydra/launcher=joblib hydra.launcher.batch_size=-1",
           "hydra.launcher.batch_size must be"),
    _sweep("joblib pre_dispatch a word", "launcher", "hydra/launcher=joblib hydra.launcher.pre_dispatch=nope",
           "hydra.launcher.pre_dispatch must be"),
    _sweep("joblib pre_dispatch negative", "launcher", "hydra/launcher=joblib hydra.launcher.pre_dispatch=-3",
           "hydra.launcher.pre_dispatch must be"),
    _sweep("submitit mem_gb negative", "launcher", "hydra/launcher=submitit_local hydra.launcher.mem_gb=-1",
           "hydra.launcher.mem_gb must be"),
]
SWEEPER = [
    _sweep("optuna sampler seed negative", "sweeper", "hydra/sweeper=optuna hydra.sweeper.sampler.seed=-1",
           "hydra.sweeper.sampler.seed must be"),
    _sweep("optuna max_failure_rate nan", "sweeper", "hydra/sweeper=optuna hydra.sweeper.max_failure_rate=nan",
           "max_failure_rate must be"),
    _sweep("job folders out of the sweep folder (subdir=../escape)", "sweeper", "hydra.sweep.subdir=../escape",
           "hydra.sweep.subdir"),
    _sweep("job folders elsewhere (an absolute subdir)", "sweeper", "hydra.sweep.subdir={root}/elsewhere",
           "hydra.sweep.subdir"),
    _sweep("a sweep of a user env beside modules named like late imports (matplotlib.py, ...)", "sweeper", "",
           "2 runs in 1 settings", expect=0, env_id="userenvs:Line-v0"),
]


# -- foreign run folders: resume=true/auto, load=, her-summary of a folder from elsewhere

def _edit_config(folder: Path, edit: Callable[[dict], None]) -> None:
    import yaml

    config = yaml.safe_load((folder / "config.yaml").read_text())
    edit(config)
    (folder / "config.yaml").write_text(yaml.safe_dump(config))


def _edit_checkpoint(folder: Path, edit: Callable[[dict], None]) -> None:
    import torch

    saved = torch.load(folder / "checkpoint.pt", weights_only=True)
    edit(saved)
    torch.save(saved, folder / "checkpoint.pt")


def _evil_env(config: dict) -> None:
    config["env"].update(name="gym", id="evilmod:Evil-v0")


class _ImportsEvilmod:  # a pickle that imports evilmod when loaded
    def __reduce__(self):
        import importlib

        return importlib.import_module, ("evilmod",)


def _foreign(name: str, args: list[str], make: Callable[[Sandbox, Path], None], says: str, expect: int = 2,
             checkpoint: bool = True, writes: bool = True) -> Attack:
    def prepare(sb: Sandbox) -> Setup:
        run = sb.run_copy("run", checkpoint=checkpoint)
        make(sb, run)
        return Setup(["her-run", *[a.replace("{run}", str(run)) for a in args]], ["run"] if writes else [])
    return Attack(name, "foreign folder", prepare, expect, says)


def _unlink_then(name: str, make: Callable[[Path], None]) -> Callable[[Sandbox, Path], None]:
    def change(sb: Sandbox, run: Path) -> None:
        path = run / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        make(path)
    return change


def _summary(name: str, make: Callable[[Sandbox, Path], None], says: str = "", expect: int = 0,
             plots: bool = False) -> Attack:
    def prepare(sb: Sandbox) -> Setup:
        sweep = sb.sweep_of_copies("sweep")
        make(sb, sweep)
        return Setup(["her-summary", str(sweep), *([] if plots else ["--no-plots"])], ["sweep"])
    return Attack(name, "foreign folder", prepare, expect, says)


def _sparse(path: Path, size: int = 2 << 30) -> None:
    """A file of ``size`` bytes that takes no disk (a hole): reading it whole costs the memory."""
    if path.exists() or path.is_symlink():
        path.unlink()
    with open(path, "wb") as f:
        f.truncate(size)


RESUME = ["resume=true", "hydra.run.dir={run}", "progress=false"]
FOREIGN = [
    _foreign("resume=auto of a folder whose config.yaml names evilmod", ["resume=auto", "hydra.run.dir={run}"],
             lambda sb, run: _edit_config(run, _evil_env), "imports a module only when the command names it",
             checkpoint=False),
    _foreign("resume=true of a checkpoint whose config names evilmod", RESUME,
             lambda sb, run: _edit_checkpoint(run, lambda s: _evil_env(s["config"])),
             "imports a module only when the command names it"),
    _foreign("load= of a checkpoint whose algo _target_ is evilmod.Boom", ["load={run}"],
             lambda sb, run: _edit_checkpoint(run, lambda s: s["config"]["algo"].update(_target_="evilmod.Boom")),
             "only registered builders may be used"),
    _foreign("resume=true of a checkpoint that pickles an import of evilmod", RESUME,
             lambda sb, run: _pickle_checkpoint(run),
             "unpickling other objects could run code"),
    _foreign("resume=auto of a config.yaml with a python/object tag", ["resume=auto", "hydra.run.dir={run}"],
             lambda sb, run: (run / "config.yaml").open("a").write("extra: !!python/object/apply:evilmod.x []\n"),
             "cannot read", checkpoint=False),
    _foreign("resume=true of a folder whose lock file is a FIFO", RESUME,
             _unlink_then(".her-run.lock", os.mkfifo), "her-run: error: "),
    _foreign("resume=true of a folder whose history.jsonl links to the user's notes", RESUME,
             lambda sb, run: _unlink_then("history.jsonl", lambda p: p.symlink_to(sb.decoy / "notes.txt"))(sb, run),
             "history.jsonl is not a regular file"),
    _foreign("resume=true of a folder whose metrics.jsonl links to a new file in the user's folder", RESUME,
             lambda sb, run: _unlink_then("metrics.jsonl", lambda p: p.symlink_to(sb.decoy / "new.jsonl"))(sb, run),
             "metrics.jsonl is not a regular file"),
    _foreign("resume=true of a folder whose tb/ links to the user's tb/", RESUME,
             lambda sb, run: _unlink_then("tb", lambda p: p.symlink_to(sb.decoy / "tb"))(sb, run),
             "tb is not a folder"),
    _foreign("resume=true of a folder whose TensorBoard event file links to the user's notes",
             [*RESUME, "budget.env_steps=300"],
             lambda sb, run: [_unlink_then(f"tb/{p.name}", lambda q: q.symlink_to(sb.decoy / "notes.txt"))(sb, run)
                              for p in (run / "tb").iterdir()], "resumed from", expect=0),
    _foreign("resume=true of a folder whose history.jsonl is 2 GB (a sparse file)", RESUME,
             lambda sb, run: _sparse(run / "history.jsonl"), "history.jsonl"),
    _summary("her-summary of a sweep whose run folder links to the user's folder",
             lambda sb, sw: (shutil.rmtree(sw / "1"), (sw / "1").symlink_to(sb.decoy))),
    _summary("her-summary of a run folder holding a link loop back to the sweep",
             lambda sb, sw: (sw / "0" / "loop").symlink_to(sw)),
    _summary("her-summary of a results.json that links to /dev/zero",
             lambda sb, sw: _unlink_then("0/results.json", lambda p: p.symlink_to("/dev/zero"))(sb, sw),
             "results.json is not a regular file"),
    _summary("her-summary (curves) of a run whose TensorBoard event file is a FIFO",
             lambda sb, sw: [(sw / "0" / "metrics.jsonl").unlink(), *[p.unlink() for p in (sw / "0" / "tb").iterdir()],
                             os.mkfifo(sw / "0" / "tb" / "events.out.tfevents.1.x")], plots=True),
    _summary("her-summary of a 2 GB results.json (a sparse file)", lambda sb, sw: _sparse(sw / "0" / "results.json"),
             "results.json"),
    _summary("her-summary of a 2 GB history.jsonl (a sparse file)", lambda sb, sw: _sparse(sw / "0" / "history.jsonl"),
             "history.jsonl"),
    _summary("her-summary of a 2 GB config.yaml (a sparse file)", lambda sb, sw: _sparse(sw / "0" / "config.yaml"),
             "config.yaml"),
]


def _pickle_checkpoint(run: Path) -> None:
    import torch

    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    saved["runner"]["hook"] = _ImportsEvilmod()
    torch.save(saved, run / "checkpoint.pt")


ATTACKS: list[Attack] = [*MIDRUN, *USER_ENV, *LAUNCHER, *SWEEPER, *FOREIGN]
assert len({a.name for a in ATTACKS}) == len(ATTACKS), "attack names must be unique"


def summary(results: list[Result]) -> dict:
    """Attacks run and, per category and in all, how many kept each rule and ended as expected."""
    def counts(rs: list[Result]) -> dict:
        return {"attacks": len(rs), **{f"{rule}_broken": sum(rule in r.broken for r in rs) for rule in RULES},
                "as_expected": sum(r.expected is None for r in rs),
                "known_defects": sum(bool(r.attack.defect) for r in rs)}
    by = {c: counts([r for r in results if r.attack.category == c]) for c in CATEGORIES}
    return {"total": counts(results), "by_category": by,
            "broken": [{"attack": r.attack.name, "category": r.attack.category, "broken": r.broken,
                        "known_defect": r.attack.defect} for r in results if r.broken],
            "unexpected": [{"attack": r.attack.name, "what": r.expected} for r in results if r.expected]}


__all__ = ["ATTACKS", "CATEGORIES", "RULES", "Attack", "Outcome", "Result", "Sandbox", "Setup", "documented_exit_codes",
           "run_attack", "run_forked", "snapshot", "summary", "warm", "writes_outside"]
