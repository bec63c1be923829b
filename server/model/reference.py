"""The reference RWKV-7 forward: fp32, one sequence, one token at a time, written line by line
from MODEL.md for readability. It is the ground truth the fast paths are tested against; it is
not meant to be fast. State rows are a `State` with B = 1 (fp32)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from server.model.checkpoint import ModelConfig
from server.model.state import State

LN_EPS = 1e-5
GN_EPS = 64e-5


class ReferenceRWKV7:
    def __init__(self, state_dict: dict[str, Tensor], cfg: ModelConfig):
        self.cfg = cfg
        # every weight as fp32 with its published shape minus the 1x1 mixing dims
        self.w = {k: v.float().squeeze(0).squeeze(0) if v.dim() == 3 else v.float()
                  for k, v in state_dict.items()}

    def zero_state(self) -> State:
        return State.zeros(self.cfg, 1, "cpu", torch.float32, torch.float32)

    def _ln(self, x: Tensor, name: str) -> Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.w[name + ".weight"], self.w[name + ".bias"],
                            eps=LN_EPS)

    def _time_mix(self, i: int, x: Tensor, state: State, v_first: Tensor | None):
        """The attention half of layer i. x: [C] residual; returns (x, v_first)."""
        p, w = f"blocks.{i}.att.", self.w
        H, N = self.cfg.n_head, self.cfg.head_size
        u = self._ln(x, f"blocks.{i}.ln1")
        d = state.shift[i, 0, 0] - u
        state.shift[i, 0, 0] = u
        xr, xw, xk, xv, xa, xg = (u + d * w[p + "x_" + c] for c in "rwkvag")
        r = xr @ w[p + "receptance.weight"].T
        k = xk @ w[p + "key.weight"].T
        v = xv @ w[p + "value.weight"].T
        wd = w[p + "w0"] + torch.tanh(xw @ w[p + "w1"]) @ w[p + "w2"]
        decay = torch.exp(-math.exp(-0.5) * torch.sigmoid(wd))  # [C], in (0, 1)
        a = torch.sigmoid(w[p + "a0"] + (xa @ w[p + "a1"]) @ w[p + "a2"])
        g = torch.sigmoid(xg @ w[p + "g1"]) @ w[p + "g2"]
        kappa = F.normalize((k * w[p + "k_k"]).view(H, N), dim=-1).view(-1)
        k = k * (1 + (a - 1) * w[p + "k_a"])
        if i == 0:
            v_first = v
        else:
            v = v + (v_first - v) * torch.sigmoid(w[p + "v0"] + (xv @ w[p + "v1"]) @ w[p + "v2"])
        # every head at once: S [H, N, N] (row = value index, column = key index), vectors [H, N]
        S = state.wkv[i, 0]
        r_, w_, k_, v_, kap, a_ = (t.view(H, N) for t in (r, decay, k, v, kappa, a))
        S_kappa = (S @ kap.unsqueeze(-1))  # S·κ: [H, N, 1]
        S.copy_(S * w_.unsqueeze(1)  # S·diag(decay)
                - S_kappa * (kap * a_).unsqueeze(1)  # (S·κ)(κ⊙a)ᵀ
                + v_.unsqueeze(-1) * k_.unsqueeze(1))  # v·kᵀ
        y = (S @ r_.unsqueeze(-1)).squeeze(-1)  # S·r: [H, N]
        y = F.group_norm(y.view(1, -1), H, w[p + "ln_x.weight"], w[p + "ln_x.bias"],
                         eps=GN_EPS).view(-1)
        bonus = (r * k * w[p + "r_k"].view(-1)).view(H, N).sum(-1, keepdim=True)  # [H, 1]
        y = y + (bonus * v.view(H, N)).view(-1)
        return x + (y * g) @ w[p + "output.weight"].T, v_first

    def _channel_mix(self, i: int, x: Tensor, state: State) -> Tensor:
        p, w = f"blocks.{i}.ffn.", self.w
        u = self._ln(x, f"blocks.{i}.ln2")
        d = state.shift[i, 1, 0] - u
        state.shift[i, 1, 0] = u
        h = torch.relu((u + d * w[p + "x_k"]) @ w[p + "key.weight"].T) ** 2
        return x + h @ w[p + "value.weight"].T

    @torch.no_grad()
    def forward(self, token: int, state: State) -> Tensor:
        """One token through every layer; ``state`` (B = 1, fp32) is updated. Returns logits [V]."""
        x = self._ln(self.w["emb.weight"][token], "blocks.0.ln0")
        v_first = None
        for i in range(self.cfg.n_layer):
            x, v_first = self._time_mix(i, x, state, v_first)
            x = self._channel_mix(i, x, state)
        return self._ln(x, "ln_out") @ self.w["head.weight"].T

    def forward_seq(self, tokens: list[int], state: State) -> Tensor:
        """Tokens one by one; returns the last token's logits [V]."""
        logits = None
        for t in tokens:
            logits = self.forward(t, state)
        return logits
