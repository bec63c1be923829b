"""Shared fixtures data for the model tests: random checkpoints and reference runs (CPU fp32)."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from server.model.checkpoint import ModelConfig, infer_config
from server.model.random import make_random_state_dict
from server.model.reference import ReferenceRWKV7
from server.model.state import State

ROOT = Path(__file__).resolve().parents[1]


def run_interpreted(script: str, timeout: float) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh Python with Triton's CPU interpreter (kernels on CPU tensors),
    ``interpreter_patch`` imported first; asserts it exited 0 (its output in the message
    otherwise)."""
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "test")))}
    out = subprocess.run([sys.executable, "-c", "import interpreter_patch\n" + script],
                         cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def state_gap(model, tokens, state: State, rtol: float = 1e-4, atol: float = 1e-5):
    """None if ``state`` is (to rounding) the state after ``tokens`` fed from the zero state in
    one ``model.prefill`` call; else ``(tensor name, max abs difference)`` of the first that is
    not."""
    want = model.new_state(1)
    if len(tokens):
        model.prefill([list(tokens)], want, logits=False)
    for name in ("wkv", "shift"):
        a, b = getattr(want, name), getattr(state, name)
        if not torch.allclose(a, b, rtol=rtol, atol=atol):
            return name, (a - b).abs().max().item()
    return None


def cache_entries_exact(model, cache) -> bool:
    """Every entry of a PrefixCache (origin "") holds the state computed from scratch for its
    tokens."""
    entries = list(cache._lru.items())
    assert all(origin == "" for (origin, _, _), _ in entries)
    return all(state_gap(model, e.tokens, e.state) is None for _, e in entries)


# name -> (n_layer, n_embd, vocab, seed): the "tiny" preset and a few-layer C=512 model
MODELS = {"tiny": (2, 128, 65536, 0), "c512": (3, 512, 1024, 1)}
PROMPT_LENS = [1, 7, 64, 300]
DECODE_STEPS = 64


@dataclass
class Case:
    sd: dict
    cfg: ModelConfig
    ref: ReferenceRWKV7
    prompts: list[list[int]]
    decode_tokens: torch.Tensor  # [n, DECODE_STEPS]
    ref_logits: torch.Tensor = None  # [n, 1 + DECODE_STEPS, V]: after the prompt, then each step
    ref_states: list[State] = field(default_factory=list)  # after prompt + all decode tokens


@contextmanager
def one_thread():
    """Run torch on one CPU thread: these small ops lose more to thread hand-offs than they gain,
    badly so when the 2-core test machine is shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def rand_tokens(n: int, vocab: int, seed: int) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def make_case(name: str, with_reference: bool = True) -> Case:
    L, C, V, seed = MODELS[name]
    sd = make_random_state_dict(L, C, V, seed=seed)
    cfg = infer_config(sd)
    prompts = [rand_tokens(n, V, 100 + n) for n in PROMPT_LENS]
    dec = torch.tensor([rand_tokens(DECODE_STEPS, V, 200 + i) for i in range(len(prompts))])
    case = Case(sd, cfg, ReferenceRWKV7(sd, cfg), prompts, dec)
    if with_reference:
        rows = []
        for prompt, toks in zip(prompts, dec.tolist()):
            st = case.ref.zero_state()
            logits = [case.ref.forward_seq(prompt, st)] + [case.ref.forward(t, st) for t in toks]
            rows.append(torch.stack(logits))
            case.ref_states.append(st)
        case.ref_logits = torch.stack(rows)
    return case


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest per-row relative error ||a - b|| / ||b|| over the last dimension."""
    a, b = a.float().cpu(), b.float().cpu()
    return ((a - b).norm(dim=-1) / b.norm(dim=-1)).max().item()


def emulate_gpu_batched_rounding(model, monkeypatch, rows: int = 4) -> None:
    """The CPU model rounds as the GPU does a prefill pass of ``rows`` or more prompts: on CUDA
    such a pass takes the Triton WKV's token loop (``kernels.prefer_chunked``), whose bits
    differ from the chunked form a prompt fed alone gets, and ``pass_keeps_bits`` says so. Here
    such a pass nudges its WKV state, and ``pass_keeps_bits(n)`` is ``n < rows``."""
    real = model.wkv_chunk

    def batched_other_bits(S, *args, **kw):
        y = real(S, *args, **kw)
        if S.shape[0] >= rows:
            S.mul_(1 + 2 ** -20)
        return y

    monkeypatch.setattr(model, "wkv_chunk", batched_other_bits)
    monkeypatch.setattr(model, "pass_keeps_bits", lambda n: n < rows)


def force_successors(model, monkeypatch, after: dict[int, int]) -> None:
    """The model's passes answer with logits that make ``after[t]`` the greedy token after
    input token ``t`` (end-of-text after any other), in every row: the real scheduler and
    engine, with their own end checks, "generate" fixed texts, whatever passes they run."""
    def forced(logits, last: list[int]):
        out = torch.full_like(logits, -1e4)
        for row, t in enumerate(last):
            out[row, after.get(t, 0)] = 1e4
        return out

    decode, prefill = model.decode, model.prefill
    monkeypatch.setattr(model, "decode", lambda tokens, *a, **k: forced(
        decode(tokens, *a, **k), tokens.tolist()))
    monkeypatch.setattr(model, "prefill", lambda lists, *a, **k: (
        lambda x: None if x is None else forced(x, [t[-1] for t in lists]))(
            prefill(lists, *a, **k)))


def after_a_template(loader, template: list[int], prompt: list[int], cache, **sampling):
    """``prompt`` decoding 12 tokens (``sampling``) on a one-slot scheduler whose step budget
    is 64 tokens, after ``template`` (``max_tokens`` 0) stored its prefix's states in ``cache``
    (None: no cache): the prefix cache's budget-filling cases, on the CPU and on CUDA. Returns
    the task once done (its state copied home)."""
    from server.scheduler import DynamicScheduler
    from server.task.task import Task

    sched = DynamicScheduler(loader, max_batch_size=1, buffer_size=4, prefix_cache=cache,
                             prefill_chunk=64)
    for tokens, max_tokens, params in ((template, 0, {}), (prompt, 12, sampling)):
        task = Task(list(tokens), max_tokens=max_tokens, **params)
        task.cache_origin = ""
        sched.add_task(task)
        sched.run()
    assert task.wait(60)
    return task


def stand_in_graphs(max_graphs: int = 2, fail=()):
    """A ``GraphedDecode`` whose captures are CPU stand-ins: each takes its logits from ``_out``
    as the real capture does, then raises while ``fail`` (a list) is non-empty. Returns
    ``(graphs, decode, states)``: ``decode(name, rows)`` steps a view of the first ``rows``
    rows of ``states[name]`` (``name`` in "abc", 4 rows each)."""
    from server.model.cuda_graph import GraphedDecode, _Graph

    gd = GraphedDecode(lambda *a, **k: None, max_graphs=max_graphs)

    def capture(tokens, state, active):
        logits = gd._out(state, tokens.shape[0], 8)
        if fail:
            raise RuntimeError("capture failed")
        graph = type("Replay", (), {"replay": staticmethod(lambda: None)})()
        return _Graph(graph, torch.zeros_like(tokens), None, logits)

    gd._capture = capture
    states = {n: State(torch.zeros(1, 2, 4, 3), torch.zeros(1, 4, 1, 2, 2)) for n in "abc"}

    def decode(name, rows):
        st = states[name]
        return gd(torch.zeros(rows, dtype=torch.long),
                  State(st.shift[:, :, :rows], st.wkv[:, :rows]), None, copy=False)

    return gd, decode, states
