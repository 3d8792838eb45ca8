"""her_rl/rules.py: which values each rule accepts and refuses, and the one-line ConfigError that names the key."""

import math

import numpy as np
import pytest

from her_rl import rules
from her_rl.errors import ConfigError
from her_rl.rules import (BOOL, COUNT, GRAD_NORM, HIDDEN, MAX_SEED, NAME_MAX, NON_NEGATIVE, PATH_MAX, POSITIVE, SEED,
                          TEXT, UNIT, UNIT_OPEN_CLOSED, RuleError, check_path, check_values, choice, integer, optional,
                          real, show)


def refused(rule, value, key="algo.k"):
    """The message of the ConfigError ``rule`` raises for ``value``, checked to be one line naming ``key``."""
    with pytest.raises(ConfigError) as info:
        rule.check(key, value)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message, message
    assert message.startswith(f"{key}="), message
    assert f"{key} must be {rule.allowed}" in message, message
    return message


def accepted(rule, value):
    rule.check("algo.k", value)  # raises if refused
    return True


# integer ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [1, 5, 3, np.int64(5), np.int32(1)])
def test_integer_accepts_whole_numbers_in_the_closed_interval(value):
    assert accepted(integer(1, 5), value)


@pytest.mark.parametrize("value", [0, 6, -1, True, False, 1.0, 3.5, "3", None, [3], float("nan"), 10**400, -10**400],
                         ids=lambda v: show(v)[:12])
def test_integer_refuses_values_outside_or_of_another_type(value):
    refused(integer(1, 5), value)


def test_bools_are_not_integers_even_where_their_value_fits():
    rule = integer(0, 1)
    assert accepted(rule, 0) and accepted(rule, 1)
    assert "algo.k=True is not allowed" in refused(rule, True)
    refused(rule, False)
    refused(COUNT, True)
    refused(SEED, False)


def test_integer_texts():
    assert integer().allowed == "an integer"
    assert integer(1).allowed == "an integer >= 1"
    assert integer(1, 5).allowed == "an integer in [1, 5]"
    assert accepted(integer(), -10**400)  # no bounds: any integer, however large
    assert accepted(integer(1), 10**400)


def test_refusal_message_names_key_value_and_rule():
    with pytest.raises(RuleError) as info:
        integer(1, 5).check("algo.k", 1.5)
    assert str(info.value) == "algo.k=1.5 is not allowed: algo.k must be an integer in [1, 5]"
    assert isinstance(info.value, ConfigError) and info.value.exit_code == 2
    assert (info.value.key, info.value.value, info.value.allowed) == ("algo.k", 1.5, "an integer in [1, 5]")


def test_refusal_of_a_huge_integer_is_short():
    message = refused(integer(1, 5), 10**20000)  # str() of it alone would raise past 4,300 digits
    assert "<an integer of about 20,000 digits>" in message
    assert len(message) < 200


def test_from_source_names_the_interpolation():
    error = RuleError("eval.episodes", 0, "an integer >= 1").from_source("env.eval_episodes")
    assert isinstance(error, RuleError)
    assert str(error) == ("eval.episodes=0 (from env.eval_episodes) is not allowed: eval.episodes must be "
                          "an integer >= 1")


def test_a_refused_string_with_a_newline_stays_one_line():
    message = refused(choice("a", "b"), "x\ny")
    assert "'x\\ny'" in message


# real ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float64("nan"), np.inf])
@pytest.mark.parametrize("rule", [real(), real(0), real(0, 1), POSITIVE, NON_NEGATIVE, UNIT])
def test_real_refuses_nan_and_infinity(rule, value):
    refused(rule, value)


@pytest.mark.parametrize("rule", [real(), POSITIVE, UNIT, UNIT_OPEN_CLOSED])
def test_real_refuses_bools_strings_and_none(rule):
    for value in (True, False, "0.5", None, [0.5]):
        refused(rule, value)


def test_real_accepts_integers_and_numpy_floats():
    assert accepted(UNIT, 1) and accepted(UNIT, 0) and accepted(UNIT, np.float32(0.5))
    assert accepted(real(), -1e308) and accepted(POSITIVE, 10**300)


def test_closed_and_open_interval_ends():
    assert accepted(UNIT, 0.0) and accepted(UNIT, 1.0)
    refused(UNIT, -1e-12)
    refused(UNIT, 1 + 1e-12)
    refused(UNIT_OPEN_CLOSED, 0.0)  # (0, 1]
    assert accepted(UNIT_OPEN_CLOSED, 5e-324) and accepted(UNIT_OPEN_CLOSED, 1.0)
    refused(UNIT_OPEN_CLOSED, 1.0000001)
    half_open = real(0, 1, hi_open=True)  # [0, 1)
    assert accepted(half_open, 0.0) and accepted(half_open, math.nextafter(1.0, 0.0))
    refused(half_open, 1.0)
    refused(POSITIVE, 0)
    refused(POSITIVE, -0.0)
    assert accepted(POSITIVE, 1e-300)
    assert accepted(NON_NEGATIVE, 0) and accepted(NON_NEGATIVE, -0.0)
    refused(NON_NEGATIVE, -1e-300)


def test_real_texts():
    assert UNIT.allowed == "a number in [0, 1]"
    assert UNIT_OPEN_CLOSED.allowed == "a number in (0, 1]"
    assert real(0, 1, lo_open=True, hi_open=True).allowed == "a number in (0, 1)"
    assert POSITIVE.allowed == "a finite number > 0"
    assert NON_NEGATIVE.allowed == "a finite number >= 0"
    assert real().allowed == "a finite number"


@pytest.mark.parametrize("value", [10**400, -10**400], ids=["1e400", "-1e400"])
def test_real_refuses_an_integer_too_large_for_a_float(value):
    refused(POSITIVE if value > 0 else real(0), value)


def test_real_refuses_the_integers_just_past_the_largest_float_and_accepts_the_largest_that_fits():
    refused(POSITIVE, 2**1024 - 1)  # 1,024 bits, yet past float's largest finite value
    POSITIVE.check("algo.k", 2**1023)


# optional, choice, BOOL, TEXT, SEED, HIDDEN, GRAD_NORM ---------------------------------------------------------------

def test_optional_accepts_none_and_what_its_rule_accepts():
    rule = optional(integer(1, 5))
    assert rule.allowed == "null or an integer in [1, 5]"
    assert accepted(rule, None) and accepted(rule, 5)
    refused(rule, 0)
    refused(rule, "null")


def test_choice_compares_types_too():
    rule = choice(True, False, "auto")
    assert rule.allowed == "one of true, false, auto"
    assert accepted(rule, True) and accepted(rule, False) and accepted(rule, "auto")
    for value in (1, 0, "true", "Auto", None):
        refused(rule, value)
    numbers = choice(1, 2)
    assert accepted(numbers, 2)
    for value in (True, 1.0, "1", 3):
        refused(numbers, value)


def test_bool_accepts_only_booleans():
    assert accepted(BOOL, True) and accepted(BOOL, False)
    for value in (1, 0, "true", "maybe", None, np.int64(1)):
        assert BOOL.allowed in refused(BOOL, value)


def test_text_is_a_non_empty_string():
    assert accepted(TEXT, "x")
    for value in ("", None, 1, ["x"]):
        refused(TEXT, value)


def test_seed_bounds():
    assert MAX_SEED == 2**32 - 1
    assert accepted(SEED, 0) and accepted(SEED, MAX_SEED) and accepted(SEED, np.uint32(MAX_SEED))
    for value in (-1, MAX_SEED + 1, 10**400, 1.0, True):
        refused(SEED, value, key="seed")
    assert COUNT.allowed == "an integer >= 1"
    refused(COUNT, 0)


@pytest.mark.parametrize("value", [[64, 64], (32,), [1], [np.int64(8), 3]])
def test_hidden_accepts_non_empty_lists_of_positive_integers(value):
    assert accepted(HIDDEN, value)


@pytest.mark.parametrize("value", [[], (), [0], [64, -1], [64, True], [64.0], [64, "64"], "64", 64, None, {64: 1}])
def test_hidden_refuses(value):
    refused(HIDDEN, value, key="algo.hidden")


def test_hidden_refusal_of_a_list_holding_a_huge_integer_is_a_rule_error():
    message = refused(HIDDEN, [10**5000, 0], key="algo.hidden")
    assert len(message) < 300


def test_grad_norm_is_null_or_positive():
    assert accepted(GRAD_NORM, None) and accepted(GRAD_NORM, 0.5)
    for value in (0, -1.0, float("inf"), float("nan")):
        refused(GRAD_NORM, value)


# check_values, show, check_path ----------------------------------------------------------------------------------------

def test_check_values_checks_keys_with_a_rule_and_names_them_with_the_prefix():
    table = {"k": integer(1, 5), "gamma": UNIT}
    check_values(table, {"k": 3, "gamma": 0.5, "no_rule": object()})  # keys without a rule are left alone
    with pytest.raises(ConfigError, match=r"^algo\.gamma=2 is not allowed: algo\.gamma must be a number in \[0, 1\]$"):
        check_values(table, {"k": 3, "gamma": 2})
    with pytest.raises(ConfigError, match=r"^env\.kwargs\.k=0 is not allowed"):
        check_values(table, {"k": 0}, prefix="env.kwargs.")
    check_values(table, {})


def test_show():
    assert show("x") == "'x'" and show("a\nb") == "'a\\nb'"
    assert show(3) == "3" and show(1.5) == "1.5" and show(None) == "None" and show(True) == "True"
    assert show(10**5000) == "<an integer of about 5,000 digits>"
    assert show(10**4000) == str(10**4000)  # below the cut-off: written out


def test_check_path_accepts_names_and_paths_up_to_the_limits():
    check_path("hydra.run.dir", "a" * NAME_MAX)
    check_path("hydra.run.dir", "/".join(["a" * 200] * 20)[:PATH_MAX - 1])
    check_path("hydra.run.dir", "outputs/run")


def test_check_path_refuses_a_long_name_counted_in_bytes():
    for name in ("a" * (NAME_MAX + 1), "é" * 128):  # 256 bytes: 128 characters of two bytes each
        with pytest.raises(ConfigError) as info:
            check_path("hydra.run.dir", f"outputs/{name}/x")
        message = str(info.value)
        assert "\n" not in message and message.startswith("hydra.run.dir is not allowed")
        assert "256 bytes" in message and f"at most {NAME_MAX}" in message


def test_check_path_refuses_a_long_path():
    path = "/".join(["a" * 200] * 21)[:PATH_MAX]
    with pytest.raises(ConfigError) as info:
        check_path("load", path)
    message = str(info.value)
    assert "\n" not in message and message.startswith("load is not allowed")
    assert f"{PATH_MAX:,} bytes" in message and f"at most {PATH_MAX - 1}" in message


def test_rule_errors_are_config_errors_module_wide():
    assert issubclass(rules.RuleError, ConfigError) and issubclass(ConfigError, ValueError)


def test_a_setting_holds_its_default_rule_and_meaning_and_a_subclass_keeps_them():
    from dataclasses import dataclass

    @dataclass
    class Base:
        lr: float = rules.setting(1e-3, POSITIVE, "Learning rate.")
        k: int = rules.setting(4, integer(0), "Goals per step.")

    @dataclass
    class NewDefault(Base):
        lr: float = 3e-4  # a plain default: the base's rule and meaning stay

    @dataclass
    class Narrower(Base):
        k: int = rules.setting(2, integer(0, 8))  # takes only some of the base's values; the base's words

    assert NewDefault().lr == 3e-4 and Narrower().k == 2
    assert rules.rules_of(NewDefault) == rules.rules_of(Base) == {"lr": POSITIVE, "k": rules.rules_of(Base)["k"]}
    words = {"lr": "Learning rate.", "k": "Goals per step."}
    assert rules.meanings_of(NewDefault) == rules.meanings_of(Narrower) == words
    assert rules.rules_of(Narrower)["k"].allowed == "an integer in [0, 8]"


def test_env_constructor_rules_sit_on_their_annotations():
    from her_rl.config.checks import ENV_KWARGS, TOP
    from her_rl.envs.bitflip import BitFlipEnv, BitFlipVectorEnv
    from her_rl.envs.deep_sea import DeepSeaEnv, DeepSeaVectorEnv

    assert {k: r.allowed for k, r in rules.arg_rules(BitFlipEnv.__init__).items()} == {"n": "an integer in [1, 4096]"}
    assert rules.arg_rules(DeepSeaEnv.__init__) == rules.arg_rules(DeepSeaVectorEnv.__init__)
    assert set(rules.arg_rules(DeepSeaEnv.__init__)) == {"size", "mapping_seed"}
    assert TOP["n"] is rules.arg_rules(BitFlipVectorEnv.__init__)["n"] is ENV_KWARGS["her_rl/BitFlip-v0"]["n"]
    assert TOP["size"] is ENV_KWARGS["her_rl/DeepSea-v0"]["size"]
    with pytest.raises(ConfigError, match=r"^n=0 is not allowed: n must be an integer in \[1, 4096\]$"):
        BitFlipVectorEnv(2, n=0)
