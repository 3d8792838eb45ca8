"""Every ```python and ```bash block of README.md and of every page under docs/ runs.

The pages are parsed when the tests are collected, so the cases follow their edits: one test per
block, named after its file, the nearest heading and the block's number under it
(``README.md-quick-start-1``, ``usage.md-resume-2``). ```text blocks (output samples, commands that
need a cluster or hours) are not run.

- Both kinds run as from a checkout: the repository root is importable (PYTHONPATH, sys.path), so a
  page may use `experiments.some_module`, while files are written in a temp working dir.
- python blocks run as they stand, each in a fresh namespace, in a temp working dir (they may write
  files such as curve.png or buffer.npz). A block that needs a name it does not define is a defect
  of its page: fix the block, never this file.
- bash blocks: every line that is a command (comments stripped) runs in order in one temp dir per
  block, with .venv/bin first on PATH, HYDRA_FULL_ERROR unset and OMP_NUM_THREADS=1, and must exit 0;
  `her-run` and `her-summary` lines run as forked children of the test process (tests/forked.py).
  `her-run` lines are shortened (see `shorten`): a few hundred env steps, no progress bar, a sweep cut
  down to two jobs (a named experiment too), and a run folder under the temp dir unless the line
  names one. The pages' own folders are relative (`hydra.run.dir=outputs/...`), so a later line
  (resume=true, load=) finds the folder an earlier line of the same block created; nothing is
  substituted.
- Lines that cannot run here are listed in SKIP with the reason pytest shows.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import forked
import pytest
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
EXPERIMENTS = ROOT / "her_rl" / "conf" / "experiment"
BIN = Path(sys.executable).parent  # .venv/bin: her-run lives beside this interpreter

# A line is skipped when its command (comment stripped) contains the key.
SKIP = {
    "make run": "creates .venv and trains 15-bit HER-DQN to the end (minutes); the same her-run "
                "line runs here with a small budget",
    "make test": "runs the whole test suite, this file included (recursive, minutes)",
    "make docs": "builds the docs site, whose pages these tests run (CI builds it after the tests)",
    "make bench": "benchmarks against Stable-Baselines3: installs it and trains for many minutes",
    "submitit_slurm": "needs a SLURM cluster (sbatch); CI has none",
    "tensorboard --logdir": "starts a server that does not exit",
    "mkdocs serve": "starts a server that does not exit",
    "pip install": "needs the network",
}

# Appended to every her-run line (replacing the line's own value of the key).
SHORT = {"budget.env_steps": "300", "progress": "false"}
SWEEP_VALUES = (2, 1)  # a sweep keeps 2 values of its first list and 1 of every other: 2 jobs
SHORT_SWEEP = {"hydra.sweeper.n_trials": "2"}  # an Optuna sweep: 2 trials


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower().replace("`", "")).strip("-")[:40] or "top"


def page_name(path: Path) -> str:
    return path.relative_to(DOCS).as_posix() if DOCS in path.parents else path.name


def page_blocks(path: Path) -> list[tuple[str, str, int, str]]:
    """(id, language, first line number, code) of every ```python / ```bash block of a page."""
    blocks, heading, per_heading = [], "top", {}
    lang, start, body = None, 0, []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = re.match(r"^\s*```\s*([\w+-]*)", line)
        if lang is None and fence:
            lang, start, body = fence.group(1).lower() or "-", no + 1, []
        elif lang is not None and fence and not fence.group(1):
            if lang in ("python", "bash"):
                k = per_heading[heading] = per_heading.get(heading, 0) + 1
                blocks.append((f"{page_name(path)}-{heading}-{k}", lang, start, "\n".join(body) + "\n"))
            lang = None
        elif lang is not None:
            body.append(line)
        elif line.startswith("#"):
            heading = _slug(re.sub(r"\{#[^}]*\}", "", line.lstrip("#")))
    assert lang is None, f"{page_name(path)}: the block opened at line {start - 1} is never closed"
    return blocks


BLOCKS = [(path, *block) for path in PAGES for block in page_blocks(path)]


def _param(lang):
    return [pytest.param(path, start, code, id=name) for path, name, lg, start, code in BLOCKS if lg == lang]


# -- python -------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, start, code", _param("python"))
def test_python_block_runs_as_it_stands(path, start, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    # Line numbers in a traceback are the page's own.
    compiled = compile("\n" * (start - 1) + code, str(path), "exec")
    exec(compiled, {"__name__": "__readme__"})
    if "her_rl.train(" in code:  # a block that trains runs twice in a row too, as a reader may run it
        exec(compiled, {"__name__": "__readme__"})


# -- bash ---------------------------------------------------------------------------------------

def commands(code: str) -> list[tuple[str, list[str]]]:
    """(line as written, tokens without the comment) of every command line of a bash block."""
    out = []
    for line in code.splitlines():
        tokens = shlex.split(line, comments=True)
        if tokens:
            out.append((line.strip(), tokens))
    return out


def _set(tokens: list[str], key: str, value: str) -> None:
    """Give `key` the value `value`: replace the line's own `key=...`, else append it."""
    for i, tok in enumerate(tokens):
        if tok.split("=", 1)[0] == key:
            tokens[i] = f"{key}={value}"
            return
    tokens.append(f"{key}={value}")


def _experiment_params(tokens: list[str]) -> dict[str, str]:
    """The sweep a named experiment (`experiment=NAME`) defines: key -> comma-separated values."""
    name = next((t.split("=", 1)[1] for t in tokens if t.startswith("experiment=")), None)
    path = EXPERIMENTS / f"{name}.yaml"
    if name is None or not path.exists():
        return {}
    params = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params") or {}
    return {str(k): str(v) for k, v in params.items()}


def shorten(tokens: list[str], folder: Path) -> list[str]:
    """A her-run line cut to a small budget, with its run or sweep folder under `folder`."""
    tokens = list(tokens)
    given = {t.split("=", 1)[0] for t in tokens}
    swept = {k: v for k, v in _experiment_params(tokens).items() if k not in given}
    if swept and "-m" not in tokens and "--multirun" not in tokens:
        tokens.insert(1, "-m")  # comma lists on the command line need it, even in a MULTIRUN experiment
    tokens += [f"{k}={v}" for k, v in swept.items()]
    sweep = "-m" in tokens or "--multirun" in tokens
    if sweep:
        lists = 0
        for i, tok in enumerate(tokens):
            key, _, value = tok.partition("=")
            if "," in value and not key.startswith("hydra") and not re.search(r"[\[\]{}()'\"]", value):
                keep = SWEEP_VALUES[min(lists, 1)]
                tokens[i] = f"{key}={','.join(value.split(',')[:keep])}"
                lists += 1
        for key, value in SHORT_SWEEP.items():
            if key in given:
                _set(tokens, key, value)
    for key, value in SHORT.items():
        _set(tokens, key, value)
    dir_key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    if not any(t.startswith(dir_key + "=") for t in tokens):
        tokens.append(f"{dir_key}={folder}")
    return tokens


def _skip_reason(tokens: list[str]) -> str | None:
    command = " ".join(tokens)
    return next((why for key, why in SKIP.items() if key in command), None)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _bash_params():
    """One case per bash block (its runnable lines, in order) and one skipped case per SKIP line,
    so that pytest shows every skip with its reason."""
    params = []
    for path, name, lang, start, code in BLOCKS:
        if lang != "bash":
            continue
        run = []
        for line, tokens in commands(code):
            reason = _skip_reason(tokens)
            if reason:
                params.append(pytest.param(path, start, [(line, tokens)], id=f"{name}-skip-{_slug(shlex.join(tokens))}",
                                           marks=pytest.mark.skip(reason=f"`{shlex.join(tokens)}`: {reason}")))
            else:
                run.append((line, tokens))
        if run:
            params.append(pytest.param(path, start, run, id=name))
    return params


@pytest.mark.parametrize("path, start, lines", _bash_params())
def test_bash_block_commands_exit_0(path, start, lines, tmp_path):
    env = _env()
    for i, (line, tokens) in enumerate(lines):
        if Path(tokens[0]).name == "her-run":
            tokens = shorten(tokens, tmp_path / f"run-{i}")
        if forked.console_script(tokens[0]):  # her-run, her-summary: the imports paid once per test process
            result = forked.run(tokens, cwd=tmp_path, env=env, text=True, timeout=300)
        else:
            result = subprocess.run(["bash", "-c", shlex.join(tokens)], cwd=tmp_path, env=env,
                                    capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (
            f"{page_name(path)} block at line {start}: `{line}`\nran: {shlex.join(tokens)}\n"
            f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}")


# -- the shortening rules themselves --------------------------------------------------------------

def test_shorten_cuts_runs_sweeps_and_named_experiments(tmp_path):
    run = shorten(["her-run", "n=30", "budget.env_steps=150000"], tmp_path)
    assert run == ["her-run", "n=30", "budget.env_steps=300", "progress=false", f"hydra.run.dir={tmp_path}"]
    sweep = shorten(["her-run", "-m", "n=10,20,30", "seed=0,1,2", "hydra.sweeper.n_trials=20"], tmp_path)
    assert "n=10,20" in sweep and "seed=0" in sweep and "hydra.sweeper.n_trials=2" in sweep
    assert f"hydra.sweep.dir={tmp_path}" in sweep
    figure = shorten(["her-run", "experiment=her_bitflip_figure", "hydra/launcher=joblib"], tmp_path)
    assert figure[1] == "-m" and "n=5,10" in figure and "algo.strategy=none" in figure and "seed=0" in figure


# -- the pages themselves -----------------------------------------------------------------------

def test_pages_have_blocks_of_both_kinds():
    langs = [lang for _, _, lang, _, _ in BLOCKS]
    assert langs.count("python") >= 5 and langs.count("bash") >= 2, langs
    assert any(path == README and lang == "bash" for path, _, lang, _, _ in BLOCKS), "README runs no command"


def test_import_her_rl_registers_every_env_id_the_pages_name():
    """tests/test_env_registration.py builds the four known ids; this follows the pages: any
    `her_rl/...-vN` id they mention must be registered by `import her_rl` in a fresh interpreter."""
    text = "\n".join(path.read_text(encoding="utf-8") for path in PAGES)
    ids = sorted(set(re.findall(r"her_rl/\w+-v\d+", text)))
    assert ids, "no page names a her_rl env id"
    code = ("import sys, gymnasium as gym, her_rl\n"
            "missing = [i for i in sys.argv[1:] if i not in gym.registry]\n"
            "assert not missing, missing\n"
            "for i in sys.argv[1:]: gym.make(i).reset(seed=0)\n")
    result = subprocess.run([sys.executable, "-c", code, *ids], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_design_page_names_every_module():
    """docs/design.md lists the modules as they are: a module added to her_rl must appear there."""
    text = (DOCS / "design.md").read_text(encoding="utf-8")
    modules = sorted(p for p in (ROOT / "her_rl").rglob("*.py") if p.stem != "__init__")
    missing = [str(p.relative_to(ROOT)) for p in modules if not re.search(rf"\b{p.stem}\b", text)]
    assert not missing, f"docs/design.md does not name {missing}"


def test_every_env_gym_command_names_its_env_id():
    """`env=gym` has no env of its own: every her-run command on the pages (in a block or a code span)
    that picks it also gives `env.id=`."""
    commands = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        found = re.findall(r"^\s*(?:\$\s*)?(her-run\b[^\n]*)", text, flags=re.M)
        found += re.findall(r"`(her-run\b[^`]*)`", text)
        commands += [(page_name(path), c.split("#", 1)[0]) for c in found]
    assert commands, "no her-run command found on the pages"
    bad = [(page, c) for page, c in commands if re.search(r"(?<![\w.])env=gym\b", c) and "env.id=" not in c]
    assert not bad, f"env=gym without env.id: {bad}"
