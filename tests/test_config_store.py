"""The configs taken from the code: algo=NAME is the algorithm class's fields, push/drag kwargs the
table tasks' defaults. One default per value, whoever builds the agent or env."""

import ast
import importlib
import pkgutil
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import her_rl.algos
from her_rl.algos.her_dqn import HerDQN
from her_rl.algos.hindsight import HindsightLearner
from her_rl.algos.base import RUNTIME_ARGS
from her_rl.config import registry
from her_rl.config.registry import ALGOS, AlgoInfo, resolve_target, target_of
from her_rl.config.compose import compose
from her_rl.errors import ConfigError
from her_rl.rules import meanings_of, rules_of, setting


def _composed_algo(*overrides: str) -> dict:
    return OmegaConf.to_container(compose(["~tuned", *overrides]).algo, resolve=True)


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_her_run_and_a_python_caller_get_the_same_defaults(name):
    cls = resolve_target(name, None)
    in_python = {f.name: list(f.default) if isinstance(f.default, tuple) else f.default
                 for f in fields(cls) if f.name not in RUNTIME_ARGS}
    composed = _composed_algo(f"algo={name}")
    assert composed.pop("name") == name and composed.pop("_target_") == target_of(name)
    assert composed == in_python


def test_no_yaml_file_can_shadow_a_class_default():
    assert not (Path(registry.__file__).parent / "conf" / "algo").exists()


def test_a_learner_that_changes_a_default_keeps_the_base_words_unless_it_writes_its_own():
    ddpg, dqn = registry.meanings("her_ddpg"), registry.meanings("her_dqn")
    assert ddpg["gamma"] == dqn["gamma"] == "Discount."
    assert dqn["polyak"] != ddpg["polyak"] and "0.5" in dqn["polyak"]  # her_dqn redeclares polyak with a reason
    assert dqn["batch_size"] == ddpg["batch_size"]  # redeclared (128) without words: the base's


@dataclass(eq=False)
class KnobDQN(HerDQN):
    NAME = "knob_dqn"

    knob: int = setting(3, doc="A knob only this test has.")
    gamma: float = 0.9  # only a new default: the base's rule and words stay


def test_a_subclass_that_changes_only_a_default_keeps_the_base_rule_and_meaning():
    assert rules_of(KnobDQN)["gamma"] is rules_of(HindsightLearner)["gamma"]
    assert meanings_of(KnobDQN)["gamma"] == meanings_of(HindsightLearner)["gamma"] == "Discount."
    assert "knob" not in rules_of(KnobDQN) and list(rules_of(KnobDQN)) == list(rules_of(HerDQN))
    with pytest.raises(ConfigError) as refused:
        KnobDQN.check_config({"gamma": 1.5})
    assert str(refused.value) == "algo.gamma=1.5 is not allowed: algo.gamma must be a number in (0, 1]"


def test_rules_and_meanings_sit_on_the_fields_only():
    for info in pkgutil.iter_modules(her_rl.algos.__path__):
        module = importlib.import_module(f"her_rl.algos.{info.name}")
        for name, value in vars(module).items():
            assert not name.endswith("RULES"), f"her_rl.algos.{info.name}.{name}"
            if isinstance(value, type):
                assert not hasattr(value, "RULES"), f"her_rl.algos.{info.name}.{name}"
    tree = ast.parse(Path(registry.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"ast", "inspect", "textwrap"}, imported


@pytest.fixture
def knob_registered(monkeypatch):
    from hydra.core.config_store import ConfigStore

    monkeypatch.setitem(ALGOS, "knob_dqn", AlgoInfo(needs_goal_env=True))
    monkeypatch.setitem(registry.learners(), "knob_dqn", KnobDQN)
    registry.store()
    yield
    ConfigStore.instance().repo["algo"].pop("knob_dqn.yaml", None)


def test_a_new_field_is_a_config_key_with_its_default_and_words(knob_registered):
    assert _composed_algo("algo=knob_dqn")["knob"] == 3
    assert _composed_algo("algo=knob_dqn", "algo.knob=5")["knob"] == 5
    assert registry.meanings("knob_dqn")["knob"] == "A knob only this test has."


def test_a_hyperparameter_without_a_default_is_refused(monkeypatch):
    @dataclass
    class Bare:
        env: dict
        lr: float

    monkeypatch.setattr(registry, "resolve_target", lambda name, target: Bare)
    with pytest.raises(TypeError, match="'lr' has no default"):
        registry.defaults("her_dqn")


@pytest.mark.parametrize("env", ["push", "drag"])
def test_her_run_and_a_python_caller_get_the_same_table_settings(env):
    from her_rl.envs.table_settings import DEFAULTS, DRAG_DEFAULTS, check_table_kwargs

    composed = OmegaConf.to_container(compose([f"env={env}", "algo=her_dqn"]).env.kwargs, resolve=True)
    assert composed == (DRAG_DEFAULTS if env == "drag" else DEFAULTS)
    # a changed success distance moves the start ranges with it, on the command line as in Python
    ours = OmegaConf.to_container(compose([f"env={env}", "algo=her_dqn", "env.kwargs.success_distance=0.1"]).env.kwargs)
    settings = check_table_kwargs(env, **ours)
    assert settings == check_table_kwargs(env, success_distance=0.1) and settings["goal_range"] == pytest.approx(0.3)
