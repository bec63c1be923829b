"""SlotBuffers: every per-slot tensor of the BatchEngine, allocated once for ``rows`` slots (the
high-water capacity). The engine works on views of the first ``cap`` rows, so shrinking (and
growing back up to ``rows``) moves no allocation: live rows are compacted in place and the state
tensors keep their addresses — which keeps each capacity's captured decode graph valid.

Views: ``wkv[:, :cap]`` and ``shift[:, :, :cap]`` are contiguous within each layer, which is
all the kernels need (they take one layer's [cap, ...] block at a time).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import torch

from server.model.sampler import SamplingBatch
from server.model.state import State

VECTORS = {"cur": torch.long, "n_gen": torch.long, "max_new": torch.long, "turn": torch.long,
           "live": torch.bool}
# SamplingBatch.empty's rows
NEUTRAL = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "presence": 0.0,
           "repetition": 0.0, "decay": 1.0, "penalties": 0.0, "seed": 0, "counter": 0}
# per-slot values packed as the rows of one tensor each, so that loading a task writes each pack
# with one scatter (a request's way to its first token: each op costs host time); the named
# tensors (SamplingBatch fields, ``vectors``) are views of these rows
FLOAT_PARAMS = ("temperature", "top_p", "min_p", "presence", "repetition", "decay")  # float32
LONG_PARAMS = ("seed", "counter")  # int64
LONG_VECTORS = ("cur", "n_gen", "max_new", "turn")
PLAN_PARAMS = ("temperature", "top_k", "top_p", "min_p")  # also on the host (SamplingBatch.host)


class SlotBuffers:
    def __init__(self, model, vocab_size: int, rows: int, device: torch.device):
        self.rows = rows
        self.device = device
        self.state = model.new_state(rows)  # shift [L, 2, rows, C], wkv [L, rows, H, N, N]
        # each pack row padded to a multiple of 8 entries: every named view starts 32-byte
        # aligned whatever ``rows`` (Triton compiles a kernel variant per pointer alignment)
        padded = -(-rows // 8) * 8

        def pack(names, dtype):  # neutral rows
            t = torch.tensor([[NEUTRAL[k]] for k in names], dtype=dtype, device=device)
            return t.expand(len(names), padded).contiguous()[:, :rows]

        self.fparams = pack(FLOAT_PARAMS, torch.float32)  # [6, rows]
        self.lparams = pack(LONG_PARAMS, torch.long)  # [2, rows]
        empty = SamplingBatch.empty(rows, vocab_size, device)  # penalties, top_k
        packed = {**dict(zip(FLOAT_PARAMS, self.fparams)), **dict(zip(LONG_PARAMS, self.lparams))}
        self.samp = SamplingBatch(**{f.name: packed.get(f.name, getattr(empty, f.name))
                                     for f in fields(empty)})
        # the sampler's plan parameters on the host too, as the device stores them
        self.host = np.array([[NEUTRAL[k]] * rows for k in PLAN_PARAMS], dtype=np.float64)
        self.samp.host = self.host
        self.lvectors = torch.zeros(len(LONG_VECTORS), padded, dtype=torch.long,
                                    device=device)[:, :rows]
        self.vectors = {**dict(zip(LONG_VECTORS, self.lvectors)),
                        "live": torch.zeros(rows, dtype=torch.bool, device=device)}
        assert set(self.vectors) == set(VECTORS)
        pin = device.type == "cuda"
        self.stop_host = torch.zeros(rows, dtype=torch.bool, pin_memory=pin)  # host flags
        self.stop_dev = self.stop_host if device.type == "cpu" else torch.zeros(
            rows, dtype=torch.bool, device=device)

    def _samp_tensors(self):
        return [getattr(self.samp, f.name) for f in fields(self.samp)]

    # ---- views -------------------------------------------------------------------------
    def state_view(self, cap: int) -> State:
        return State(self.state.shift[:, :, :cap], self.state.wkv[:, :cap])

    def samp_view(self, cap: int) -> SamplingBatch:
        view = SamplingBatch(**{f.name: getattr(self.samp, f.name)[:cap]
                                for f in fields(self.samp)})
        view.host = self.host[:, :cap]
        return view

    def set_plan_params(self, slots: list[int], temperature: list, top_k: list,
                        top_p: list, min_p: list) -> None:
        """The host copy of rows ``slots`` (the device rows are written by the caller), rounded
        as the device stores them: float32 temperature, top-p and min-p, int32 top-k."""
        self.host[0, slots] = np.asarray(temperature, dtype=np.float32)
        self.host[1, slots] = np.asarray(top_k, dtype=np.int64).astype(np.int32)
        self.host[2, slots] = np.asarray(top_p, dtype=np.float32)
        self.host[3, slots] = np.asarray(min_p, dtype=np.float32)

    def packed_view(self, cap: int) -> tuple:
        """The packs' first ``cap`` columns: (fparams [6, cap], lparams [2, cap], lvectors
        [4, cap]), rows in FLOAT_PARAMS / LONG_PARAMS / LONG_VECTORS order."""
        return self.fparams[:, :cap], self.lparams[:, :cap], self.lvectors[:, :cap]

    # ---- moving rows ---------------------------------------------------------------------
    def compact(self, keep: list[int]) -> None:
        """Rows ``keep`` -> rows 0..len(keep)-1, in place (through a gathered copy, so sources
        and destinations may overlap)."""
        n = len(keep)
        if keep == list(range(n)):
            return
        idx = torch.tensor(keep, dtype=torch.long, device=self.device)
        st = self.state
        st.shift[:, :, :n] = st.shift.index_select(2, idx)
        st.wkv[:, :n] = st.wkv.index_select(1, idx)
        for t in self._samp_tensors() + list(self.vectors.values()):
            t[:n] = t.index_select(0, idx)
        self.stop_host[:n] = self.stop_host[torch.tensor(keep, dtype=torch.long)]
        self.host[:, :n] = self.host[:, keep]
        if self.stop_dev is not self.stop_host:
            self.stop_dev[:n] = self.stop_dev.index_select(0, idx)
        self.samp.invalidate()

    def copy_rows(self, src: SlotBuffers, cap: int, keep: list[int]) -> None:
        """Rows ``keep`` of ``src`` (whose view has ``cap`` rows) -> rows 0..len(keep)-1."""
        if not keep:
            return
        idx = torch.tensor(keep, dtype=torch.long, device=self.device)
        dst = list(range(len(keep)))
        self.state.assign(dst, src.state_view(cap).select(idx))
        self.samp.assign(dst, src.samp_view(cap).select(idx))
        for k, t in self.vectors.items():
            t[:len(keep)] = src.vectors[k][idx]
        self.stop_host[:len(keep)] = src.stop_host[torch.tensor(keep, dtype=torch.long)]

    def neutral(self, lo: int, hi: int) -> None:
        """Rows lo..hi-1 become free slots (not live, neutral sampling rows, no stop flag).
        Their recurrent state is left as it is: a free row only ever takes identity steps, and
        ``BatchEngine.load`` writes a row's state before it is used."""
        if hi <= lo:
            return
        for f in fields(self.samp):
            getattr(self.samp, f.name)[lo:hi] = NEUTRAL[f.name]
        for t in self.vectors.values():
            t[lo:hi] = 0
        for j, k in enumerate(PLAN_PARAMS):
            self.host[j, lo:hi] = NEUTRAL[k]
        self.stop_host[lo:hi] = False
        self.stop_dev[lo:hi] = False
        self.samp.invalidate()
