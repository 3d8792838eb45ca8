"""Your own env: ``env=gym env.id=module:Env-v0`` imports the module the user names, and only that."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A plain (not goal) env of the user's: reach the right end of a short line.
LINE_ENV = textwrap.dedent("""
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces

    class LineEnv(gym.Env):
        def __init__(self, length=4):
            self.length = length
            self.observation_space = spaces.Box(0, length, (1,), np.float32)
            self.action_space = spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.x = 0
            return np.array([0.0], np.float32), {}

        def step(self, action):
            self.x = max(0, self.x + (1 if int(action) == 1 else -1))
            done = self.x >= self.length
            return np.array([self.x], np.float32), float(done), done, False, {}

    gym.register(id="UserLine-v0", entry_point=LineEnv, max_episode_steps=20)
""")


@pytest.fixture
def user_dir(tmp_path):
    """A folder outside the repository holding the user's env modules (the grid goal env of
    experiments/ and a plain env), which is also the current folder of the her-run calls."""
    shutil.copy(ROOT / "experiments" / "grid_goal_env.py", tmp_path / "user_grid.py")
    (tmp_path / "user_line.py").write_text(LINE_ENV)
    return tmp_path


def _her_run(her_run, cwd, *args):
    return subprocess.run([her_run, *args, "progress=false"], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_user_goal_env_trains_with_her_dqn_and_resumes_by_folder(her_run, user_dir):
    first = _her_run(her_run, user_dir, "algo=her_dqn", "env=gym", "env.id=user_grid:GridGoal-v0",
                     "hydra.run.dir=grid", "budget.env_steps=800", "eval.success_threshold=1.0")
    assert first.returncode == 0, first.stderr
    saved = json.loads((user_dir / "grid" / "results.json").read_text())
    assert saved["env_id"] == "user_grid:GridGoal-v0" and saved["env_steps"] >= 800
    (user_dir / "user_grid.py").write_text((user_dir / "user_grid.py").read_text()
                                           + "\nopen('imported.txt', 'a').write('x')\n")
    # the folder is data: its saved id imports nothing until the command names it, as the refusal says
    refused = _her_run(her_run, user_dir, "resume=true", "hydra.run.dir=grid", "budget.env_steps=4000")
    assert refused.returncode == 2 and not (user_dir / "imported.txt").exists()
    assert refused.stderr.strip().splitlines()[-1].endswith(
        "continue with her-run resume=true hydra.run.dir=grid env.id=user_grid:GridGoal-v0"), refused.stderr
    again = _her_run(her_run, user_dir, "resume=true", "hydra.run.dir=grid", "env.id=user_grid:GridGoal-v0",
                     "budget.env_steps=4000")
    assert again.returncode == 0, again.stderr
    assert (user_dir / "imported.txt").read_text() == "x"
    resumed = json.loads((user_dir / "grid" / "results.json").read_text())
    assert resumed["env_steps"] > saved["env_steps"] and resumed["eval_success_rate"] >= 0.8
    history = [json.loads(line) for line in (user_dir / "grid" / "history.jsonl").read_text().splitlines()]
    assert [h["event"] for h in history] == ["start", "resume"]


def test_user_plain_env_trains_with_ppo_and_loads(her_run, user_dir):
    done = _her_run(her_run, user_dir, "algo=ppo", "env=gym", "env.id=user_line:UserLine-v0",
                    "hydra.run.dir=line", "budget.env_steps=2048")
    assert done.returncode == 0, done.stderr
    named = _her_run(her_run, user_dir, "load=line", "env.id=user_line:UserLine-v0", "eval.episodes=5")
    assert named.returncode == 0, named.stderr
    assert json.loads((user_dir / "line" / "eval.json").read_text())["episodes"] == 5


def test_a_saved_config_never_imports_a_module_by_itself(her_run, user_dir):
    """load= of a run on a user env imports its module only when the command line names it; so does
    her_rl.load (the user imports the module first)."""
    assert _her_run(her_run, user_dir, "algo=ppo", "env=gym", "env.id=user_line:UserLine-v0",
                    "hydra.run.dir=line", "budget.env_steps=300").returncode == 0
    (user_dir / "user_line.py").write_text(LINE_ENV + "\nopen('imported.txt', 'w').write('x')\n")
    refused = _her_run(her_run, user_dir, "load=line")
    assert refused.returncode == 2 and not (user_dir / "imported.txt").exists()
    assert refused.stderr.strip().splitlines()[-1].startswith("her-run: error: env.id 'user_line:UserLine-v0' names")
    script = "import her_rl\ntry:\n    her_rl.load('line')\nexcept her_rl.ConfigError as e:\n    print('refused:', e)\n"
    python = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=user_dir, timeout=120)
    assert "refused: env.id 'user_line:UserLine-v0' names module 'user_line'" in python.stdout, python.stderr
    assert not (user_dir / "imported.txt").exists()
    loaded = "import user_line, her_rl\nprint(her_rl.load('line').predict([0.0])[0] in (0, 1))\n"
    python = subprocess.run([sys.executable, "-c", loaded], capture_output=True, text=True, cwd=user_dir, timeout=120)
    assert python.stdout.strip() == "True", python.stderr


@pytest.mark.parametrize("env_id,message", [
    ("no_such_module:X-v0", "cannot import module 'no_such_module'"),
    ("user_line:Other-v0", "registers no env 'Other-v0'"),
    ("user_broken:X-v0", "importing module 'user_broken' failed: ZeroDivisionError"),
])
def test_a_bad_user_env_is_one_line(her_run, user_dir, env_id, message):
    (user_dir / "user_broken.py").write_text("1 / 0\n")
    done = _her_run(her_run, user_dir, "algo=ppo", "env=gym", f"env.id={env_id}", "hydra.run.dir=bad")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and message in done.stderr, done.stderr
    assert not (user_dir / "bad").exists()


def test_user_goal_env_gets_the_same_checks(her_run, user_dir):
    done = _her_run(her_run, user_dir, "algo=her_dqn", "env=gym", "env.id=user_line:UserLine-v0")
    assert done.returncode == 2 and "needs a goal-conditioned env" in done.stderr


def test_the_docs_show_the_example_env_as_it_is():
    """docs/custom-envs.md prints experiments/grid_goal_env.py's code (all but its docstring)."""
    code = (ROOT / "experiments" / "grid_goal_env.py").read_text().split('"""', 2)[2].strip()
    page = (ROOT / "docs" / "custom-envs.md").read_text()
    assert f"```python\n{code}\n```" in page
    assert len([line for line in code.splitlines() if line.strip()]) <= 32


def test_the_users_folder_serves_its_modules_but_joins_no_search_path(tmp_path, monkeypatch):
    """After the import, a helper the env imports later is still found beside it, yet the folder is on
    no search path: a hydra_plugins/ folder there is no part of Hydra's plugin namespace, whose scan
    imports every module in it."""
    from her_rl.envs import families
    from her_rl.envs.families import import_env_module

    (tmp_path / "user_later.py").write_text(LINE_ENV.replace("UserLine-v0", "UserLater-v0").replace(
        "self.x = 0", "import user_later_helper\n        self.x = user_later_helper.START"))
    (tmp_path / "user_later_helper.py").write_text("START = 0\n")
    (tmp_path / "hydra_plugins" / "planted").mkdir(parents=True)
    (tmp_path / "hydra_plugins" / "planted" / "__init__.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(families._USER_FOLDERS, "folders", [])
    import gymnasium as gym

    import_env_module("user_later:UserLater-v0")
    assert str(tmp_path) not in sys.path
    env = gym.make("UserLater-v0")
    env.reset(seed=0)  # imports the helper beside the module
    env.close()
    assert "user_later_helper" in sys.modules
    import hydra_plugins

    assert all(not str(p).startswith(str(tmp_path)) for p in hydra_plugins.__path__)
