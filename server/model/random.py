"""Random RWKV-7 checkpoints in the exact published layout (key names, shapes, order).

    python -m server.model.random OUT.pth --preset tiny|0.1b|0.4b|1.5b|2.9b|7.2b|13.3b
    python -m server.model.random OUT.pth --layers 4 --embd 512 --vocab 1024 --seed 1

Each tensor is drawn from its own generator seeded by (seed, key), directly in the target dtype,
so a tensor's values do not depend on which others are generated. The initialisation keeps every
activation O(1) (LayerNorm weights ~1, projections with std ~1/sqrt(fan_in), decay in (0.54, 0.99))
so the forward stays finite in fp16 for every preset, and the head gives logits with std ~2 that
depend on the input (greedy outputs differ between prompts).
"""

from __future__ import annotations

import argparse
import os
import math
import time
import zlib
from pathlib import Path

import torch

from server.files import write_whole

from server.model.checkpoint import HEAD_SIZE, ModelConfig, expected_shapes
from server.model.presets import PRESETS

VOCAB_SIZE = 65536
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _lora(scale: float, n_embd: int) -> int:
    return max(32, round(scale * math.sqrt(n_embd) / 32) * 32)


def make_config(n_layer: int, n_embd: int, vocab_size: int = VOCAB_SIZE) -> ModelConfig:
    """The ModelConfig of a random checkpoint (LoRA sizes from the MODEL.md formulas)."""
    if n_embd % HEAD_SIZE or n_embd <= 0 or n_layer <= 0 or vocab_size <= 0:
        raise ValueError(f"need n_layer > 0, vocab > 0 and n_embd a multiple of {HEAD_SIZE}, "
                         f"got L{n_layer} C{n_embd} V{vocab_size}")
    return ModelConfig(n_layer=n_layer, n_embd=n_embd, n_head=n_embd // HEAD_SIZE,
                       head_size=HEAD_SIZE, vocab_size=vocab_size,
                       d_decay=_lora(2.5, n_embd), d_aaa=_lora(2.5, n_embd),
                       d_value=_lora(1.7, n_embd) if n_layer > 1 else 0,
                       d_gate=_lora(5.0, n_embd))


def preset_config(name: str, vocab_size: int = VOCAB_SIZE) -> ModelConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return make_config(*PRESETS[name], vocab_size=vocab_size)


def _init(key: str, shape: tuple[int, ...]) -> tuple[str, float, float]:
    """(distribution, a, b) for one key: ("normal", mean, std) or ("uniform", low, high)."""
    name = key.split(".", 2)[-1] if key.startswith("blocks.") else key
    fan_in = shape[-1] if name.endswith(".weight") else shape[0]
    if name.startswith(("ln", "att.ln_x")) or key.startswith("ln_out"):
        return ("normal", 1.0, 0.1) if name.endswith("weight") else ("normal", 0.0, 0.1)
    table = {
        "emb.weight": ("normal", 0.0, 1.0),
        "head.weight": ("normal", 0.0, 2.0 / math.sqrt(fan_in)),
        "att.w0": ("uniform", -4.0, 1.0),  # decay = exp(-e^-0.5 * sigmoid(w)) in (0.54, 0.99)
        "att.a0": ("normal", 0.0, 0.5),
        "att.v0": ("normal", 0.0, 0.5),
        "att.k_k": ("uniform", 0.5, 1.0),
        "att.k_a": ("uniform", 0.5, 1.5),
        "att.r_k": ("normal", 0.0, 0.1),
        "att.output.weight": ("normal", 0.0, 0.5 / math.sqrt(fan_in)),
        "ffn.value.weight": ("normal", 0.0, 0.5 / math.sqrt(fan_in)),
    }
    if name in table:
        return table[name]
    if name.startswith(("att.x_", "ffn.x_")):
        return ("uniform", 0.0, 1.0)
    if name[-1] == "2" and name[:-1] in ("att.w", "att.a", "att.v"):
        return ("normal", 0.0, 0.5 / math.sqrt(fan_in))
    return ("normal", 0.0, 1.0 / math.sqrt(fan_in))  # w1 a1 v1 g1 g2, r/k/v, ffn.key


def random_tensor(key: str, shape: tuple[int, ...], seed: int = 0,
                  dtype: torch.dtype = torch.bfloat16, device="cpu") -> torch.Tensor:
    """The value of ``key`` in the random checkpoint with ``seed`` (independent of other keys).
    Values depend on the device's generator: only CPU values are the checkpoint's."""
    gen = torch.Generator(device).manual_seed((seed * 1_000_003 + zlib.crc32(key.encode())) % 2**63)
    kind, p, q = _init(key, shape)
    t = torch.empty(shape, dtype=dtype, device=device)
    return t.normal_(p, q, generator=gen) if kind == "normal" else t.uniform_(p, q, generator=gen)


def make_random_state_dict(n_layer: int, n_embd: int, vocab_size: int = VOCAB_SIZE, seed: int = 0,
                           dtype: torch.dtype = torch.bfloat16, device="cpu",
                           to=None) -> dict[str, torch.Tensor]:
    """A random RWKV-7 state dict with the published key names, shapes and order.
    (``device`` other than cpu: built there directly, e.g. for large GPU tests; ``to``: each
    tensor moved there once drawn, e.g. drawn on a GPU and kept on the CPU.)"""
    cfg = make_config(n_layer, n_embd, vocab_size)
    to = device if to is None else to
    return {k: random_tensor(k, s, seed, dtype, device).to(to)
            for k, s in expected_shapes(cfg).items()}


def _parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m server.model.random", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="output .pth path (an existing file: --force)")
    ap.add_argument("--preset", choices=list(PRESETS), default=None)
    ap.add_argument("--layers", type=int, default=None, help="n_layer (overrides the preset)")
    ap.add_argument("--embd", type=int, default=None, help="n_embd, a multiple of 64")
    ap.add_argument("--vocab", type=int, default=VOCAB_SIZE, help=f"default {VOCAB_SIZE}")
    ap.add_argument("--seed", type=int, default=0, help="default 0")
    ap.add_argument("--dtype", choices=list(DTYPES), default="bf16", help="default bf16")
    ap.add_argument("--force", action="store_true", help="overwrite an existing OUT")
    args = ap.parse_args(argv)
    if os.path.isdir(args.out):  # (os.path: False, not a traceback, behind a closed folder)
        ap.error(f"{args.out} is a directory; name a .pth file")
    if os.path.lexists(args.out) and not args.force:  # (a mistyped path to a real model was
        ap.error(f"{args.out} exists; give --force to overwrite it")  # replaced unasked)
    if args.preset is None and (args.layers is None or args.embd is None):
        ap.error("give --preset, or both --layers and --embd")
    L, C = PRESETS[args.preset] if args.preset else (None, None)
    # "is None", not "or": --layers 0 was read as "not given" (a preset's L, or a TypeError)
    args.layers = L if args.layers is None else args.layers
    args.embd = C if args.embd is None else args.embd
    try:
        make_config(args.layers, args.embd, args.vocab)  # a usage error, not a traceback
    except ValueError as e:
        ap.error(str(e))
    return args


def save_whole(sd: dict, out: Path) -> None:
    """``torch.save`` to ``out`` whole (``write_whole``); an unopenable file is an ``OSError``
    naming why."""
    def save(tmp: Path) -> None:
        try:
            torch.save(sd, tmp)
        except RuntimeError as e:  # (torch's writer reports an unopenable file so)
            raise OSError(str(e).splitlines()[-1].split("strerror:")[-1].strip()) from None

    out.parent.mkdir(parents=True, exist_ok=True)
    write_whole(out, save)


def main(argv=None) -> None:
    args = _parse(argv)
    L, C = args.layers, args.embd
    t0 = time.perf_counter()
    sd = make_random_state_dict(L, C, args.vocab, args.seed, DTYPES[args.dtype])
    try:
        save_whole(sd, args.out)
    except OSError as e:
        raise SystemExit(f"error: cannot write {args.out}: {e.strerror or e}") from None
    n = sum(t.numel() for t in sd.values())
    print(f"wrote {args.out}: L{L} C{C} V{args.vocab} {args.dtype}, {n / 1e6:.1f}M parameters, "
          f"{time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
