"""Shared pieces of the benchmarks: random models built in memory, dummy tasks, GPU memory,
the roofline, and markdown tables.

Random weights are generated directly on the device in the run dtype (no 5.5 GB file): speed
does not depend on the weights' values. Ceilings are the ones measured on the H200 machine
(device copy 4.3 TB/s counting bytes read + written; dense bf16/fp16 products ~790 TFLOP/s).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch

from server.scheduler.engine import SlotTask

BANDWIDTH = 4.3e12  # bytes/s, measured device-to-device copy (read + write)
MATMUL_FLOPS = 790e12  # FLOP/s, measured dense bf16 8192^3 product
MATMUL_WEIGHTS = ("wr", "wk", "wv", "wo", "w1", "w2", "a1", "a2", "v1", "v2", "g1", "g2",
                  "ffn_key", "ffn_value")
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def dtype_list(text: str) -> str:
    """argparse ``type`` of a comma-separated list of DTYPES' names (an unknown one was a
    KeyError traceback later)."""
    bad = [d for d in text.split(",") if d not in DTYPES]
    if bad:
        raise argparse.ArgumentTypeError(f"{', '.join(bad)}: choose from {', '.join(DTYPES)}")
    return text


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def device_arg(text: str) -> str:
    """argparse type of ``--device``: a device this machine has (a one-line error, not
    torch's traceback from the first tensor made there)."""
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r} is no device (cpu, cuda, cuda:1)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: CUDA is not available here")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"{text}: this machine has "
                                         f"{torch.cuda.device_count()} CUDA device(s)")
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text}: the benchmarks run on cpu or cuda")
    return text


def build_model(preset: str, device: str | None = None, dtype: str = "fp16",
                state_dtype: str = "fp32", seed: int = 0, **kw):
    """RWKV7 with random weights of ``preset``, generated on ``device`` in ``dtype``."""
    from server.model.checkpoint import infer_config
    from server.model.forward import RWKV7
    from server.model.random import PRESETS, make_random_state_dict

    device = device or default_device()
    if device == "cpu" and dtype == "fp16":
        dtype = "fp32"
    L, C = PRESETS[preset]
    sd = make_random_state_dict(L, C, seed=seed, dtype=DTYPES[dtype], device=device)
    cfg = infer_config(sd)
    model = RWKV7(sd, cfg, device=device, dtype=DTYPES[dtype],
                  state_dtype=DTYPES[state_dtype], **kw)
    del sd
    if torch.device(device).type == "cuda":  # the state dict's small tensors, made there and
        torch.cuda.empty_cache()  # copied by the model's pack, went only now
    return model


class BenchLoader:
    """What the scheduler needs of a loader (model, encode, decode) around an in-memory model."""

    def __init__(self, model, name: str):
        from server.model.tokenizer import Tokenizer

        self.model, self.cfg, self.name = model, model.cfg, name
        self.tokenizer = Tokenizer()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, tokens) -> str:
        return self.tokenizer.decode(tokens)


@dataclass
class DummyTask(SlotTask):
    """A fresh task with the stress test's sampling (``BatchEngine.load``'s attributes)."""

    top_p: float = 0.3
    top_k: int = 50
    presence_penalty: float = 0.0
    penalty_decay: float = 1.0
    seed: int = 0


def product_options(parser) -> None:
    """``--gemv-rows``, ``--lora-stream``, ``--seq-one-kernel``, ``--split-invariant`` and
    ``--prefill-tokens`` (read by ``apply_product_options``)."""
    parser.add_argument("--gemv-rows", type=int, default=0, help="products of up to this many "
                        "rows (<= 256) through the skinny-product kernel instead of cuBLAS "
                        "(default: the server's, fused.GEMV_MAX_ROWS = 4): a short prompt's pass "
                        "both ways (CUDA)")
    parser.add_argument("--lora-stream", type=int, default=1, choices=(0, 1),
                        help="0: the LoRA stages of cuBLAS passes on the main stream, after "
                             "the r/k/v product (served: beside it on a second stream; CUDA)")
    parser.add_argument("--seq-one-kernel", type=int, default=1, choices=(0, 1),
                        help="0: a batched prefill's WKV token loop as three launches (pre_wkv, "
                             "the loop, post_wkv; fp32 intermediates in memory) instead of one "
                             "(decode_triton.time_mix_seq; CUDA)")
    parser.add_argument("--split-invariant", type=int, default=1, choices=(0, 1),
                        help="0: prefill without split invariance (RWKV_SPLIT_INVARIANT=false: "
                             "every product whole, short passes' own kernels)")
    parser.add_argument("--prefill-tokens", type=int, default=0, help="tokens (rows x padded "
                        "width) a prefill pass holds at most (default: the model's, 16384)")


def apply_product_options(model, args) -> None:
    """``product_options``' flags on the model (defaults: as served)."""
    apply_gemv_rows(model, args.gemv_rows)
    model.set_split_invariant(bool(args.split_invariant))
    if args.prefill_tokens:
        model.prefill_tokens = args.prefill_tokens
    if model._fused is not None:
        model._fused.lora_stream = bool(args.lora_stream)
        model._fused.seq_one_kernel = bool(args.seq_one_kernel)


def copyback_option(parser) -> None:
    """``--copyback-mb`` of benches that drive a scheduler directly (the memory bench, which
    builds a served runtime, sets ``RWKV_COPYBACK_MB`` instead): the bytes of finished rows'
    states gathered on the device and not yet copied home, at most (``copyback.BUDGET_BYTES``,
    256 MiB since session 66; 1 GiB before, the served process's peak under load once prefill
    passes were capped: docs/performance.md, session 62)."""
    parser.add_argument("--copyback-mb", type=int, default=0, help="the copy-back's budget of "
                        "gathered states on the device, MiB (default: 256, RWKV_COPYBACK_MB's)")


def apply_copyback(engine, mb: int) -> None:
    """``--copyback-mb`` on an engine (0: as served)."""
    if mb < 0:
        raise SystemExit("--copyback-mb: 0 (as served) or more MiB")
    if mb:
        engine.copyback.budget = mb << 20


def copyback_text(stats: list) -> str:
    """The copy-back thread's figures (``engine.unload_stats``, or their difference over a
    run) as the benches print them."""
    return (f"{stats[0]} tasks in {stats[1] * 1e3:.0f} ms (to host memory {stats[3] * 1e3:.0f},"
            f" clones {stats[4] * 1e3:.0f}); the scheduler waited {stats[2] * 1e3:.0f} ms for "
            f"its budget")


def apply_gemv_rows(model, rows: int) -> None:
    """``--gemv-rows``: the fused path's skinny products up to ``rows`` rows (0: as served)."""
    if not rows:
        return
    if model._fused is None:
        raise SystemExit("--gemv-rows needs the fused CUDA path")
    model._fused.use_gemv_up_to(rows)

def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def cuda_graph(fn):
    """A CUDA graph of ``fn()``, which runs once first on a side stream (kernels compiled,
    memory allocated outside the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def replay_us(graph, reps: int) -> list[float]:
    """µs of each of ``reps`` replays of ``graph``, timed one by one with events; sorted."""
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        graph.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)
    return sorted(times)


def timed(fn, device) -> tuple[float, object]:
    """(seconds, result) of fn(), the device synchronised before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def memory() -> dict:
    """GPU memory in GB: now allocated, peak allocated, reserved by the caching allocator."""
    if not torch.cuda.is_available():
        return dict(alloc=0.0, peak=0.0, reserved=0.0)
    g = 2 ** 30
    return dict(alloc=torch.cuda.memory_allocated() / g,
                peak=torch.cuda.max_memory_allocated() / g,
                reserved=torch.cuda.memory_reserved() / g)


def free_memory() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def model_bytes(model) -> int:
    """Bytes of the weights every decode step reads whatever its batch: every layer weight, the
    final LayerNorm and the head (the embedding table's rows are read per token:
    ``embedding_row_bytes``)."""
    total = model.head.numel() * model.head.element_size()
    total += sum(t.numel() * t.element_size() for t in model.ln_out)
    for lw in model.layers:
        for t in vars(lw).values():
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


def embedding_row_bytes(model) -> int:
    """Bytes of the embedding table read per token (its row) from the weights' memory: none
    where the table is elsewhere (CUDA: pinned host memory, its rows read over the bus,
    ``embedding.py``)."""
    if model.emb.device != model.head.device:
        return 0
    return model.emb.shape[1] * model.emb.element_size()


def matmul_params(model) -> int:
    """Parameters in matrix products per token (2-D weights of the layers, and the head)."""
    n = model.head.numel()
    for lw in model.layers:
        n += sum(getattr(lw, k).numel() for k in MATMUL_WEIGHTS if getattr(lw, k) is not None)
    return n


def wkv_flops(model) -> int:
    """FLOPs of one token's WKV recurrence over all layers: per head, S <- S·diag(decay)
    (N² multiplies), S·κ, the two rank-one updates and y = S·r (N² multiply-adds each): 9 N²."""
    cfg = model.cfg
    return 9 * cfg.n_layer * cfg.n_head * cfg.head_size ** 2


def pass_flops(model, tokens: int, heads: int) -> int:
    """FLOPs of a pass of ``tokens`` tokens through the layers (2 x the layers' matmul
    parameters and the WKV recurrence, per token) of which ``heads`` go through the head
    (decode: every token; prefill: a prompt's last token, when its logits are wanted)."""
    head = model.head.numel()
    return (2 * (matmul_params(model) - head) + wkv_flops(model)) * tokens + 2 * head * heads


def state_bytes(model) -> int:
    """Bytes of one slot's recurrent state (WKV + token shift)."""
    cfg = model.cfg
    wkv = cfg.n_layer * cfg.n_head * cfg.head_size ** 2 * torch.finfo(model.state_dtype).bits // 8
    shift = cfg.n_layer * 2 * cfg.n_embd * torch.finfo(model.dtype).bits // 8
    return wkv + shift


def roofline(model, batch: int, tokens_per_row: int = 1) -> dict:
    """Floors of one decode step (tokens_per_row = 1) or one prefill pass with every row's
    logits: bytes (weights once, each token's embedding row where it is in the weights' memory,
    each row's state read and written) over the bandwidth, FLOPs (``pass_flops``: the head
    once a row) over the matrix rate."""
    tokens = batch * tokens_per_row
    nbytes = (model_bytes(model) + tokens * embedding_row_bytes(model)
              + 2 * batch * state_bytes(model))
    flops = pass_flops(model, tokens, batch)
    return dict(bytes=nbytes, flops=flops, t_mem=nbytes / BANDWIDTH, t_flop=flops / MATMUL_FLOPS)


def table(header: list[str], rows: list[list]) -> str:
    """A markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def gpu_name() -> str:
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()} · torch {torch.__version__}"
    return f"CPU · torch {torch.__version__}"
