"""The learner base of both families: the hindsight learners (her_rl/algos/hindsight.py) and the
on-policy ones (her_rl/algos/onpolicy.py).

A learner is a dataclass of its hyperparameters: the fields are the constructor's keywords, so the
config keys the registry accepts are read from them, and each is declared once, by
``her_rl.rules.setting``: its default, what it may be (its rule) and what it means. A subclass that
only changes a default keeps its base's rule and words; ``check_config`` adds the checks of keys that
constrain each other. Besides its keys a learner declares what a checkpoint holds, ``STATE``: attribute names
(a dotted name reaches into an attribute), each a module, optimiser, tensor, random generator,
counter or anything else with ``state_dict``/``load_state_dict``. An entry is saved under its name
(dots as underscores) unless ``SAVED_AS`` gives the key earlier versions wrote, so their checkpoints
load and new ones read the same; an entry that is None (a learner built without it) is neither saved
nor loaded, and one of ``OPTIONAL`` may be missing from a checkpoint. ``LEGACY_KEYS`` reads keys
that earlier versions wrote under other names.
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np
import torch

from her_rl.envs.probe import EnvSpaces, probe_env
from her_rl.rl.memory import check_env_copies
from her_rl.rules import check_values, rules_of


RUNTIME_ARGS = ("env", "seed", "device", "inference", "checked")
"""Constructor arguments the runner passes itself; never config keys. ``inference=True`` builds
only what acting needs (networks, input statistics): no training envs, no replay memory.
``checked=True``: the values passed the class's rules already (her_rl/config/checks.py, in the
run's plan), so the constructor does not check them a second time."""


@dataclass(eq=False)
class Learner:
    """What every learner has: its config keys and their check, its own torch generator, the
    optimiser step and the declared checkpoint state (see the module's docstring)."""

    NAME: ClassVar[str] = "learner"
    STATE: ClassVar[tuple[str, ...]] = ()
    SAVED_AS: ClassVar[dict[str, str]] = {}
    """Entry -> its checkpoint key, where that is not the entry's own name."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    """Entries a checkpoint may lack (they stay as built)."""
    LEGACY_KEYS: ClassVar[dict[str, str]] = {}
    """Checkpoint key of an earlier version -> today's key."""
    CLIP_KEY: ClassVar[str] = ""
    """The field holding the max gradient norm of :meth:`step` (None or 0: no clipping)."""

    env: dict[str, Any]
    seed: int = 0
    device: str = "cpu"
    inference: bool = False
    checked: bool = False

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        """Raise a one-line ConfigError unless ``values`` (config keys) meet the rules; keys
        without a rule are left to the registry's key check."""
        check_values(rules_of(cls), values)

    def __post_init__(self) -> None:
        if not self.checked:  # a planned run's values were checked once, by its plan
            self.check_config(self.hyperparameters())
        if not self.inference:  # load= and predict collect nothing: one copy reads the spaces
            self.check_collection()
        self.device = torch.device(self.device)
        # the learner's own draws (policy samples, noise, minibatches): the global RNG may be anyone's
        self.generator = torch.Generator(device=self.device).manual_seed(int(self.seed))

    def collection(self, env_spaces: EnvSpaces) -> tuple[int, int, int, str] | None:
        """What one iteration collects, from the config and the env's probed spaces alone: ``(env
        copies, vector steps it keeps of each, bytes of those steps' arrays, the keys that set them)``;
        None: nothing to size."""
        return None

    def check_collection(self) -> None:
        """The training copies and what one iteration keeps of them, sized against the memory the process
        may use before any copy is built (a saved config's too: a resume builds its learner here)."""
        env_spaces = probe_env(self.env)  # once per env config and process: a plan's probe is reused
        found = self.collection(env_spaces)
        if found is not None:
            copies, steps, nbytes, lower = found
            check_env_copies(copies, env_spaces.observation_space, env_spaces.action_space,
                             f"a batched env of {copies:,} training copies of {self.env.get('id')} with the {steps:,} "
                             "steps of each one iteration keeps", lower, nbytes)

    def hyperparameters(self) -> dict[str, Any]:
        """The config keys and their values: every field but the runner's own arguments."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in RUNTIME_ARGS}

    def step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, clip: bool = True) -> None:
        """Backward ``loss``, clip the optimiser's gradients to the norm ``CLIP_KEY`` gives, step."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.clip_and_step(optimizer, clip)

    def clip_and_step(self, optimizer: torch.optim.Optimizer, clip: bool = True) -> None:
        """Clip the gradients already in ``optimizer``'s parameters (see :meth:`step`), then step."""
        max_norm = getattr(self, self.CLIP_KEY) if clip and self.CLIP_KEY else None
        if max_norm:
            torch.nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], max_norm)
        optimizer.step()

    # -- checkpoints ---------------------------------------------------------------------------
    def _entries(self) -> list[tuple[str, str, Any]]:
        """``(name, checkpoint key, object)`` of every declared entry this learner has."""
        entries = [(name, self.SAVED_AS.get(name, name.replace(".", "_")), operator.attrgetter(name)(self))
                   for name in self.STATE]
        return [entry for entry in entries if entry[2] is not None]

    def state_dict(self) -> dict:
        return {key: state_of(obj) for _, key, obj in self._entries()}

    def load_state_dict(self, state: dict) -> None:
        state = {**{new: state[old] for old, new in self.LEGACY_KEYS.items() if old in state}, **state}
        for name, key, obj in self._entries():
            if key not in state and name in self.OPTIONAL:
                continue
            if isinstance(obj, int):  # a counter: replaced, not updated in place
                owner, _, attr = name.rpartition(".")
                setattr(operator.attrgetter(owner)(self) if owner else self, attr, int(state[key]))
            else:
                restore(obj, state[key])


def state_of(obj: Any) -> Any:
    """A checkpointable copy of a module, optimiser, tensor, generator or counter (plain data and tensors only)."""
    if isinstance(obj, int):
        return obj
    if isinstance(obj, np.random.Generator):
        return obj.bit_generator.state
    if isinstance(obj, torch.Generator):
        return obj.get_state()
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    return obj.state_dict()


GENERATOR_STATE_SIZES = (torch.default_generator.get_state().numel(), 16)
"""Bytes of a torch generator's state: a CPU one's (Mersenne Twister), a CUDA one's (seed and offset)."""


def restore(obj: Any, state: Any) -> None:
    """Load ``state`` (see :func:`state_of`) into ``obj`` in place."""
    if isinstance(obj, np.random.Generator):
        obj.bit_generator.state = state
    elif isinstance(obj, torch.Generator):
        if state.numel() != obj.get_state().numel() and state.numel() in GENERATOR_STATE_SIZES:
            # saved on another device: seeded from that state instead (the same state, the same seed)
            digest = hashlib.blake2b(state.cpu().numpy().tobytes(), digest_size=8).digest()
            obj.manual_seed(int.from_bytes(digest, "little") >> 1)
        else:  # any other size is no generator's state: set_state refuses it
            obj.set_state(state)
    elif isinstance(obj, torch.Tensor):
        with torch.no_grad():
            obj.copy_(state)
    else:
        obj.load_state_dict(state)
