"""Bit-flip's element-wise Q-network (the bit-flip default past 30 bits), the settings the tuned file picks by
n, and far relabelled goals (``random_mix``)."""

import re

import pytest
import torch

from her_rl.errors import ConfigError
from her_rl.rl.nets import ElementwiseDuelingQ, ElementwiseQ
from her_rl.config.compose import compose
from her_rl.run.runner import run


def _permuted(x: torch.Tensor, n: int, perm: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[:, :n][:, perm], x[:, n:][:, perm]], dim=1)


def test_elementwise_q_moves_with_its_elements_and_its_weights_fit_any_n():
    torch.manual_seed(0)
    q = ElementwiseQ(5, [8, 8])
    x = torch.randn(3, 10)
    perm = torch.tensor([2, 0, 1, 4, 3])
    torch.testing.assert_close(q(_permuted(x, 5, perm)), q(x)[:, perm])  # relabel the bits, the Q-values follow
    big = ElementwiseQ(9, [8, 8])
    big.load_state_dict(q.state_dict())  # the same weights serve 9 bits
    assert big(torch.randn(2, 18)).shape == (2, 9)
    # elements with the same (bit, goal bit) pair get the same value, the others need not
    bits = torch.tensor([[1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0]])  # obs, goal: bits 1 and 2 differ
    out = q(bits)[0]
    assert torch.allclose(out[0], out[3]) and torch.allclose(out[0], out[4]) and not torch.allclose(out[0], out[1])


def test_dueling_elementwise_q_ranks_actions_by_their_own_element_alone():
    torch.manual_seed(0)
    q = ElementwiseDuelingQ(6, [8, 8])
    x = torch.randn(4, 12)
    perm = torch.tensor([5, 3, 0, 1, 2, 4])
    torch.testing.assert_close(q(_permuted(x, 6, perm)), q(x)[:, perm])
    y = x.clone()
    y[:, [2, 8]] = torch.randn(4, 2)  # element 2 (its bit and goal bit) changes, the others stay
    gap_x, gap_y = q(x)[:, 0] - q(x)[:, 1], q(y)[:, 0] - q(y)[:, 1]
    torch.testing.assert_close(gap_x, gap_y)  # the ranking of actions 0 and 1 does not see element 2 (nor d)
    assert not torch.allclose(q(x)[:, 2] - q(x)[:, 0], q(y)[:, 2] - q(y)[:, 0])
    big = ElementwiseDuelingQ(10, [8, 8])
    big.load_state_dict(q.state_dict())
    assert big(torch.randn(2, 20)).shape == (2, 10)


def _dueling_over_every_element(q: ElementwiseDuelingQ, x: torch.Tensor) -> torch.Tensor:
    """The dueling Q-values the long way: every element through the layers."""
    h = torch.relu(q.local(x.view(len(x), 2, q.n).transpose(1, 2)))
    return q.advantage(h).squeeze(-1) + q.value(h.mean(1))


def _shared_over_every_element(q: ElementwiseQ, x: torch.Tensor) -> torch.Tensor:
    """ElementwiseQ's values the long way: every element through the layers, the row mean added after each."""
    h = x.view(len(x), 2, q.n).transpose(1, 2)
    for local, pooled in zip(q.local, q.pooled):
        h = torch.relu(local(h) + pooled(h.mean(1, keepdim=True)))
    return q.head(h).squeeze(-1) + q.pooled_head(h.mean(1))


LONG_WAY = {ElementwiseDuelingQ: _dueling_over_every_element, ElementwiseQ: _shared_over_every_element}


@pytest.mark.parametrize("net", [ElementwiseDuelingQ, ElementwiseQ])
def test_q_on_bits_equals_every_element_through_the_layers_values_and_gradients(net):
    torch.manual_seed(0)
    q, long_way = net(37, [8, 8]), LONG_WAY[net]
    x = torch.randint(0, 2, (5, 74)).float() * 2 - 1  # bits as the network gets them: +-1
    fast, slow = q(x), long_way(q, x)
    torch.testing.assert_close(fast, slow)
    weights = torch.randn_like(fast)
    grads = [torch.autograd.grad((out * weights).sum(), list(q.parameters())) for out in (q(x), slow)]
    for g_fast, g_slow in zip(*grads):
        torch.testing.assert_close(g_fast, g_slow)
    # a row with one pattern only, and one bit away from its goal, as greedy episodes see them
    edge = torch.ones(2, 74)
    edge[1, 0] = -1.0
    torch.testing.assert_close(q(edge), long_way(q, edge))
    # not 5 x 37: the update's cost no longer grows with n (ElementwiseQ: four a row, its mean differs by row)
    assert _rows_through_the_layers(q, x) == (4 if net is ElementwiseDuelingQ else 5 * 4)


def _rows_through_the_layers(q, x: torch.Tensor) -> int:
    rows = []
    hook = q.local[0].register_forward_hook(lambda module, args, out: rows.append(args[0].shape[:-1].numel()))
    try:
        q(x)
    finally:
        hook.remove()
    return sum(rows)


@pytest.mark.parametrize("net", [ElementwiseDuelingQ, ElementwiseQ])
def test_q_off_bits_still_sends_every_element_through_the_layers(net):
    torch.manual_seed(0)
    q = net(6, [8, 8])
    x = torch.randint(0, 2, (3, 12)).float() * 2 - 1
    x[1, 4] = 0.5  # one input that is not a bit: the four patterns do not cover it
    torch.testing.assert_close(q(x), LONG_WAY[net](q, x))
    assert not torch.allclose(q(x)[1], q(x.clamp(-1, 1).sign())[1])
    assert _rows_through_the_layers(q, x) == 3 * 6


def test_elementwise_network_is_refused_where_actions_do_not_match_elements(tmp_path):
    with pytest.raises(ConfigError, match="algo.network=elementwise needs one action per observation and goal"):
        run(compose(["env=push", "algo.network=elementwise", "progress=false", "budget.env_steps=10"]),
            out_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("override", ["algo.network=conv", "algo.random_mix=-0.5"])
def test_bad_large_n_keys_are_refused(tmp_path, override):
    with pytest.raises(ConfigError, match=override.split("=")[0]):
        run(compose([override, "progress=false", "budget.env_steps=10"]), out_dir=tmp_path / "run")


def test_the_default_bitflip_settings_solve_64_bits_in_a_few_thousand_env_steps(tmp_path):
    cfg = compose(["n=64", "progress=false", "budget.env_steps=4000",
                   "eval.every_env_steps=1000"])
    assert (cfg.algo.network, list(cfg.algo.hidden)) == ("elementwise", [32, 32])
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.95, results


def test_the_default_bitflip_settings_solve_300_bits_with_the_dueling_network(tmp_path):
    cfg = compose(["n=300", "seed=0", "progress=false", "budget.env_steps=6000", "eval.every_env_steps=600"])
    assert cfg.algo.network == "elementwise_dueling"
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.95, results


@pytest.mark.parametrize("n, network, hidden, lr, gamma, cycle, batch, strategy", [
    (5, "mlp", [256, 256], 0.003, 0.98, 4, 256, "future"), (30, "mlp", [256, 256], 0.003, 0.98, 4, 256, "future"),
    (31, "elementwise", [32, 32], 0.001, 0.98, 4, 256, "future"),
    (128, "elementwise", [32, 32], 0.001, 0.98, 4, 256, "future"),
    (129, "elementwise_dueling", [32, 32], 0.001, 0.999, 1, 64, "future"),
    (256, "elementwise_dueling", [32, 32], 0.001, 0.999, 1, 64, "future"),
    (1000, "elementwise_dueling", [32, 32], 0.001, 0.999, 1, 64, "future"),
    (1001, "elementwise_dueling", [32, 32], 0.001, 0.999, 1, 64, "next_future"),
    (4096, "elementwise_dueling", [32, 32], 0.001, 0.999, 1, 64, "next_future")])
def test_the_bitflip_tuned_file_picks_its_settings_by_n(n, network, hidden, lr, gamma, cycle, batch, strategy):
    algo = compose([f"n={n}"]).algo
    assert (algo.network, list(algo.hidden), algo.lr) == (network, hidden, lr)
    assert (algo.gamma, algo.episodes_per_cycle, algo.batch_size, algo.strategy) == (gamma, cycle, batch, strategy)
    assert compose([f"n={n}", "algo.strategy=final"]).algo.strategy == "final"
    assert compose([f"n={n}", "algo.network=mlp"]).algo.network == "mlp"  # a command-line value still wins


def test_by_size_takes_the_smallest_bound_that_holds_the_size():
    from her_rl.config.checks import by_size

    table = {"30": "a", "4096": "b", "100": "c"}
    assert [by_size(n, table) for n in (1, 30, 31, 100, 101, 4096)] == ["a", "a", "c", "c", "b", "b"]
    assert (by_size(5000, table), by_size("abc", table)) == ("b", "a")  # for the size's own rule to refuse


@pytest.mark.parametrize("n, message", [("abc", "n='abc' is not allowed: n must be an integer"),
                                        ("5000", "n=5000 is not allowed: n must be an integer in [1, 4096]")])
def test_a_bad_n_is_named_by_its_own_rule_not_by_the_tuned_file(tmp_path, n, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        run(compose([f"n={n}", "progress=false", "budget.env_steps=10"]), out_dir=tmp_path / "run")
