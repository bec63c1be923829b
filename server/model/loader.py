"""RWKV070ModelLoader: the SDK-facing bundle of an RWKV-7 model (weights + batched forward) and its
tokenizer, as the seed README shows:

    loader = RWKV070ModelLoader("models/rwkv7-2.9b.pth", "eof_v20230424.txt")
    loader.encode("你好"); loader.decode([123, 456]); loader.gen_state(batch_size=1)
"""

from __future__ import annotations

from pathlib import Path

import torch
from loguru import logger

from server.model.checkpoint import (check_state_dict, load_checkpoint, unused_keys,
                                     weights_digest)
from server.model.forward import RWKV7
from server.model.state import State

_DTYPES = {"fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
           "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
           "fp32": torch.float32, "float32": torch.float32, "float": torch.float32}


def parse_device(device) -> torch.device:
    """None or "auto" -> cuda when available, else cpu."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def parse_dtype(dtype) -> torch.dtype | None:
    """A torch.dtype, a name ("fp16", "bf16", "fp32", ...) or None/"auto" (-> None)."""
    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; use one of fp16, bf16, fp32")
    return _DTYPES[dtype]


def cpu_has_bf16() -> bool:
    """Whether this CPU runs bf16 products natively (AVX-512 BF16 or AMX), as torch's oneDNN
    backend reports it (a private probe: False where it is missing)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _verbose() -> bool:
    """``RWKV_VERBOSE`` for the SDK's log sink (the server reads it in ``setup_logging``); True
    if the settings cannot be read (their error is the server's, or the script's, to raise)."""
    try:
        from server.config import settings
    except Exception:
        return True
    return settings.verbose


class RWKV070ModelLoader:
    """Loads ``model_path`` (an RWKV-7 .pth) onto ``device`` in ``dtype`` (default: fp16 on CUDA,
    fp32 on CPU) with a WKV state in ``state_dtype`` (default fp32), plus the tokenizer at
    ``vocab_path`` (default: eof_v20230424.txt at the repository root).
    ``state_dict``: the checkpoint's tensors already in memory (``model_path`` then only names
    the model; the demo's random weights), checked as a file's are. ``split_invariant``: see
    ``RWKV7`` (prefill's bits independent of how a prompt is cut into passes);
    ``prefill_tokens``: the tokens one batched prefill pass holds at most (``RWKV7``).
    Raises CheckpointError for a missing or bad checkpoint."""

    def __init__(self, model_path, vocab_path=None, device=None, dtype=None, state_dtype=None,
                 fused: bool | None = None, state_dict: dict | None = None,
                 split_invariant: bool = True, prefill_tokens: int = 16384):
        from server.logger import replace_default_sink
        from server.model.tokenizer import ReusingEncoder, Tokenizer

        replace_default_sink(_verbose())  # SDK use: the server's format, not a DEBUG line a pulse
        self.model_path = Path(model_path)
        self.name = self.model_path.stem
        # the vocabulary first: a missing or bad file fails in a moment, not after the model
        self.tokenizer = Tokenizer(vocab_path)
        if state_dict is None:
            sd, self.cfg = load_checkpoint(self.model_path)
        else:
            sd, self.cfg = state_dict, check_state_dict(state_dict, self.name)
        # (the scheduler stamps the states it computes with it; a state of other weights is
        # refused: ``policy.other_weights``)
        self.digest = weights_digest(sd)
        unused = unused_keys(sd, self.cfg)
        if unused:
            shown = ", ".join(unused[:5]) + (", ..." if len(unused) > 5 else "")
            logger.warning(f"{self.name}: {len(unused)} tensors are not part of the RWKV-7 "
                           f"layout and are ignored ({shown}); if the checkpoint is a variant "
                           "with extra parameters, its output will not be that model's")
        self.model = RWKV7(sd, self.cfg, device=parse_device(device), dtype=parse_dtype(dtype),
                           state_dtype=parse_dtype(state_dtype) or torch.float32, fused=fused,
                           split_invariant=split_invariant, prefill_tokens=prefill_tokens)
        del sd
        self._encoder = ReusingEncoder(self.tokenizer)
        if self.tokenizer.vocab_size > self.cfg.vocab_size:
            logger.warning(f"tokenizer has {self.tokenizer.vocab_size} ids but the model only "
                           f"{self.cfg.vocab_size}: larger ids will fail")
        if self.tokenizer.max_id + 64 < self.cfg.vocab_size:  # (published: padded to 64)
            logger.warning(f"the vocabulary file defines ids up to {self.tokenizer.max_id} but "
                           f"the model has {self.cfg.vocab_size}: the ids past it decode to "
                           "nothing (is it the RWKV world vocabulary, eof_v20230424.txt, whole?)")
        logger.info(f"loaded {self.name}: L{self.cfg.n_layer} C{self.cfg.n_embd} "
                    f"V{self.cfg.vocab_size} on {self.model.device} ({self.model.dtype}, "
                    f"state {self.model.state_dtype})")
        if parse_dtype(dtype) is None and self.model.device.type == "cpu" and cpu_has_bf16():
            logger.info("this CPU computes bf16 natively: RWKV_DTYPE=bf16 (dtype='bf16') "
                        "decodes about 2x faster than the fp32 default, with half-precision "
                        "rounding (docs/performance.md, 'On the CPU')")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; reuses a recent text's tokens for a shared prefix (exact:
        tokenizer.ReusingEncoder), as a chat's history comes again with every turn."""
        return self._encoder.encode(text)

    def decode(self, tokens) -> str:
        return self.tokenizer.decode(tokens)

    def gen_state(self, batch_size: int = 1, device="cpu") -> State:
        """A zero State of ``batch_size`` rows in the model's dtypes (on the CPU by default:
        a task's own state lives there)."""
        m = self.model
        return State.zeros(self.cfg, batch_size, device, m.dtype, m.state_dtype)
