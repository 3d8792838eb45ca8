"""Random Network Distillation (Burda et al., 2018): novelty as prediction error.

A frozen, randomly initialised *target* network embeds (whitened) inputs; a *predictor*
network is trained to match it on visited inputs. The squared prediction error is high
on inputs unlike the ones trained on, and is used as an intrinsic reward.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn

from .nets import mlp
from .normalize import RunningMeanStd
from .utils import np2torch

__all__ = ["RND"]


class RND(nn.Module):
    """RND bonus module: frozen target net, trained predictor, input and reward statistics.

    Inputs are ``[..., input_dim]`` vectors (a next state, or ``input_from(state, onehot)``).
    Typical loop: ``update_obs_stats(x)`` -> ``r = intrinsic_reward(x)`` ->
    ``normalize_rewards(r.view(T, N))`` -> ``remember(x)`` -> ``learn()``
    (or call ``predictor_loss`` inside your own optimisation step).
    """

    OBS_CLIP = 5.0

    def __init__(self, input_dim: int, hidden: Sequence[int] = (256, 256), embed_dim: int = 128,
                 lr: float = 1e-4, gamma_int: float = 0.99, memory_capacity: int = 10000,
                 device="cpu", seed: int | None = None, whiten_inputs: bool = True,
                 ret_norm_decay: float = 1.0):
        super().__init__()
        if not 0.0 < ret_norm_decay <= 1.0:
            raise ValueError(f"ret_norm_decay must lie in (0, 1], got {ret_norm_decay}")
        self.ret_norm_decay = float(ret_norm_decay)
        self.whiten_inputs = bool(whiten_inputs)
        self.input_dim, self.gamma_int = int(input_dim), float(gamma_int)
        self.device = torch.device(device)
        # Build nets under a private RNG so a seed gives reproducible nets without
        # disturbing the caller's global torch RNG stream.
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            self.target = mlp(input_dim, embed_dim, hidden, activation="relu", ortho_init=True)
            self.predictor = mlp(input_dim, embed_dim, hidden, activation="relu", ortho_init=True)
        for p in self.target.parameters():
            p.requires_grad_(False)  # the target is never trained
        self.to(self.device)
        self.optimizer = torch.optim.Adam(self.predictor.parameters(), lr=lr)
        self.obs_rms = RunningMeanStd((self.input_dim,))
        self.ret_rms = RunningMeanStd(())
        self._ret: torch.Tensor | None = None  # per-env running discounted intrinsic return
        self.rng = np.random.default_rng(seed)
        self.memory_capacity = int(memory_capacity)
        if self.memory_capacity < 0:
            raise ValueError(f"memory_capacity must be >= 0, got {memory_capacity}")
        self._memory = torch.zeros(self.memory_capacity, self.input_dim, device=self.device)
        self.memory_size = 0

    # -- inputs ----------------------------------------------------------------------
    @staticmethod
    def input_from(state: Any, action_onehot: Any = None) -> torch.Tensor:
        """RND input: the state, or ``[state, one-hot action]`` concatenated on the last dim."""
        s = np2torch(state)
        if action_onehot is None:
            return s
        return torch.cat([s, np2torch(action_onehot).to(s.device)], dim=-1)

    def _flat(self, x: Any) -> torch.Tensor:
        x = np2torch(x, device=self.device)
        if x.shape[-1] != self.input_dim:
            raise ValueError(f"expected last dim {self.input_dim}, got shape {tuple(x.shape)}")
        return x.reshape(-1, self.input_dim)

    def whiten(self, x: Any) -> torch.Tensor:
        """Normalise with the running input statistics and clip to ``[-5, 5]`` (identity when
        ``whiten_inputs`` is off: one-hot inputs, whose statistics drift with the policy's visits)."""
        if not self.whiten_inputs:
            return np2torch(x, device=self.device)
        return self.obs_rms.normalize(np2torch(x, device=self.device), clip=self.OBS_CLIP)

    def update_obs_stats(self, x: Any) -> None:
        """Add inputs ``[..., input_dim]`` to the running whitening statistics (no-op when
        ``whiten_inputs`` is off: nothing reads them)."""
        if self.whiten_inputs:
            self.obs_rms.update(self._flat(x))

    # -- rewards ---------------------------------------------------------------------
    def forward(self, x: Any) -> torch.Tensor:
        """Per-sample prediction error ``mean((pred - target)^2)`` over the embedding, with grad."""
        z = self.whiten(x)
        return (self.predictor(z) - self.target(z).detach()).pow(2).mean(-1)

    @torch.no_grad()
    def intrinsic_reward(self, x: Any) -> torch.Tensor:
        """Novelty bonus of inputs ``[B, input_dim]`` -> ``[B]`` (any leading dims kept)."""
        return self.forward(x)

    def normalize_rewards(self, r_int: Any) -> torch.Tensor:
        """Scale ``[T, N]`` intrinsic rewards by the running std of the discounted intrinsic return.

        The return is non-episodic (never reset at episode ends) and its per-env state is
        carried across calls, as in the RND paper. The std is over all history (paper) with
        ``ret_norm_decay=1``; below 1 the earlier calls' weight shrinks by that factor per call,
        so the large errors of an untrained predictor stop holding the scale down.
        Returns a tensor of the same shape.
        """
        r = np2torch(r_int, device=self.device)
        squeeze = r.dim() == 1
        if squeeze:
            r = r.unsqueeze(1)
        if self._ret is None or self._ret.shape != r.shape[1:]:
            self._ret = torch.zeros(r.shape[1:], device=r.device, dtype=r.dtype)
        rets = torch.empty_like(r)
        for t in range(r.shape[0]):  # forward-time running return, vectorised over envs
            self._ret = self._ret * self.gamma_int + r[t]
            rets[t] = self._ret
        self.ret_rms.forget(self.ret_norm_decay)
        self.ret_rms.update(rets.reshape(-1))
        out = r / float(np.sqrt(self.ret_rms.var + 1e-8))
        return out.squeeze(1) if squeeze else out

    # -- training ----------------------------------------------------------------------
    def predictor_loss(self, x: Any, fraction: float = 1.0) -> torch.Tensor:
        """MSE between predictor and the FROZEN (detached) target on a random ``fraction`` of x."""
        z = self.whiten(self._flat(x))
        if fraction < 1.0:
            k = max(1, int(round(fraction * z.shape[0])))
            sel = torch.from_numpy(self.rng.permutation(z.shape[0])[:k]).to(z.device)
            z = z[sel]
        with torch.no_grad():
            target = self.target(z)
        return (self.predictor(z) - target).pow(2).mean()

    def remember(self, x: Any) -> None:
        """Store inputs for :meth:`learn`; when full, random old entries are evicted.
        With ``memory_capacity=0`` (callers that train the predictor themselves) it stores nothing."""
        x = self._flat(x).detach()
        if self.memory_capacity == 0:
            return
        n_free = self.memory_capacity - self.memory_size
        head, rest = x[:n_free], x[n_free:]
        if len(head):
            self._memory[self.memory_size:self.memory_size + len(head)] = head
            self.memory_size += len(head)
        if len(rest):
            if len(rest) > self.memory_capacity:
                rest = rest[torch.from_numpy(self.rng.choice(len(rest), self.memory_capacity, replace=False))]
            slots = torch.from_numpy(self.rng.choice(self.memory_capacity, len(rest), replace=False))
            self._memory[slots.to(self.device)] = rest

    @property
    def memory(self) -> torch.Tensor:
        """The stored inputs ``[memory_size, input_dim]``."""
        return self._memory[: self.memory_size]

    def learn(self, n_epochs: int = 1, chunk_size: int = 256) -> float:
        """Train the predictor for ``n_epochs`` passes over the memory; returns the mean loss (0.0 if empty)."""
        if self.memory_size == 0:
            return 0.0
        losses = []
        for _ in range(n_epochs):
            perm = torch.from_numpy(self.rng.permutation(self.memory_size)).to(self.device)
            for start in range(0, self.memory_size, chunk_size):
                loss = self.predictor_loss(self._memory[perm[start:start + chunk_size]])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                losses.append(loss.item())
        return float(np.mean(losses))

    # -- checkpointing -------------------------------------------------------------------
    def get_extra_state(self) -> dict:
        """Statistics saved alongside the weights (tensors/floats only: weights_only-safe)."""
        return {"obs_rms": self.obs_rms.state_dict(), "ret_rms": self.ret_rms.state_dict(),
                "ret": self._ret.detach().cpu() if self._ret is not None else torch.zeros(0),
                "has_ret": self._ret is not None}

    def set_extra_state(self, state: dict) -> None:
        """Restore what :meth:`get_extra_state` saved."""
        self.obs_rms.load_state_dict(state["obs_rms"])
        self.ret_rms.load_state_dict(state["ret_rms"])
        self._ret = state["ret"].to(self.device) if state["has_ret"] else None
