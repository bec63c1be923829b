"""Host-side costs of a request that no device timing shows: tokenising a chat turn and the
torch operations a decode pulse dispatches (each one is a kernel launch or host work; on the
H200 machine a small op costs ~30-50 us of host time: docs/performance.md).

    python -m server.bench host                 # CPU is enough: it counts, and times Python

* tokenise: the ``ttft`` conversation (``--turns`` turns to ~``--target`` tokens, rendered as
  the server renders a chat), its last turn encoded with ``Tokenizer.encode`` and with the
  loader's ``ReusingEncoder`` after the previous turns (median of ``--repeat``);
* ops per step: torch operations dispatched (a TorchDispatchMode counter) by one
  ``BatchEngine.pulse`` of ``--steps`` steps of one sampled row (temperature 0.7, top-k 50,
  top-p 0.9) of the tiny model, divided by the steps, with the model's own operations counted
  apart (on CUDA they are one graph replay a step);
* prefix cache host work: ``prefix_hashes`` of a new prompt and 32 ``common_prefix_length``
  comparisons with recent ones (what the prefiller does on the scheduler's thread), at 2,000,
  32,768 and 131,072 tokens;
* ops of a request: the engine calls between admission and the first token (load, prefill with
  the prompt's last token, start, the first pulse), the model's operations left out, for a
  greedy and a sampled task. On the CPU a pulse step's bookkeeping runs as torch code (on CUDA
  one Triton launch each), so the CPU counts are somewhat higher than CUDA's.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

from server.bench import common
from server.bench.conversation import Conversation


def tokenise_ms(turns: int, target: int, repeat: int) -> tuple[int, float, float]:
    """(tokens of the last turn, ms plain, ms reusing), medians."""
    from server.api.chat import build_chat_prompt
    from server.model.tokenizer import ReusingEncoder, Tokenizer

    tok = Tokenizer()
    chat = Conversation(tok, turns, target, 32, "You are helpful.")
    prompts = []
    for turn in range(turns):
        prompts.append(build_chat_prompt(chat.ask(turn), think=False))
        chat.reply("Sure, here is a short answer to that. " * 3)
    plain, reusing = [], []
    for _ in range(repeat):
        enc = ReusingEncoder(tok)
        for p in prompts[:-1]:
            enc.encode(p)
        t0 = time.perf_counter()
        ids = tok.encode(prompts[-1])
        t1 = time.perf_counter()
        assert enc.encode(prompts[-1]) == ids
        reusing.append(time.perf_counter() - t1)
        plain.append(t1 - t0)
    return len(ids), statistics.median(plain) * 1e3, statistics.median(reusing) * 1e3


def prefix_ms(lengths, repeat: int) -> list[tuple[int, float, float, float]]:
    """Per length n: (n, ms of ``prefix_hashes`` of n random token ids, ms of 32
    ``common_prefix_length`` calls against an equal copy, ms of 32 against a copy that parts at
    token 50) — the prefix cache's host work for a new prompt, on the scheduler's thread. Min
    of ``repeat``, after one call that grows the hash powers' table."""
    import random
    from array import array

    from server.model.tokenizer import common_prefix_length
    from server.scheduler.prefix_cache import prefix_hashes

    def best(fn) -> float:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times) * 1e3

    rng, rows = random.Random(0), []
    prefix_hashes(array("I", [1]) * max(lengths))
    for n in lengths:
        toks = array("I", [rng.randrange(65536) for _ in range(n)])
        same, parts = array("I", toks), array("I", toks)
        parts[min(50, n - 1)] += 1
        rows.append((n, best(lambda: prefix_hashes(toks)),
                     best(lambda: [common_prefix_length(toks, same) for _ in range(32)]),
                     best(lambda: [common_prefix_length(toks, parts) for _ in range(32)])))
    return rows


def _counter():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    return Count


@contextlib.contextmanager
def _apart(obj, name: str, counter):
    """While inside, calls of ``obj.name`` dispatch under ``counter`` (an outer counter sees
    them too): the model's own operations counted apart."""
    real = getattr(obj, name)

    def counted(*a, **k):
        with counter:
            return real(*a, **k)

    setattr(obj, name, counted)
    try:
        yield counter
    finally:
        delattr(obj, name)  # the class's method again


def tiny_engine():
    from server.scheduler.engine import BatchEngine

    return BatchEngine(common.build_model("tiny", "cpu", "fp32", "fp32"))


def request_ops(engine, temperature: float) -> dict[str, int]:
    """Torch ops of the engine calls on a request's way to its first token (load, prefill with
    the prompt's last token, start, the first pulse), the model's own operations left out, for
    one task (the second of two identical requests: the first one builds what is cached)."""
    Count = _counter()
    prompt = list(range(5, 100))
    counts = {}
    for _ in range(2):
        counts = {}
        task = common.DummyTask(temperature=temperature, top_k=50, top_p=0.9)
        with _apart(engine.model, "prefill", Count()) as in_model:
            for name, call in (("load", lambda: engine.load([0], [task])),
                               ("prefill", lambda: engine.prefill([0], [prompt], first={0})),
                               ("start", lambda: engine.start([0], [prompt[-1]], [4])),
                               ("first pulse", lambda: engine.pulse(1))):
                c = Count()
                with c:
                    call()
                counts[name] = c.n
        counts["prefill"] -= in_model.n
        engine.free([0])
    return counts


def ops_per_step(engine, steps: int) -> tuple[float, float]:
    """(all torch ops, the model's) per step of a pulse of one sampled row."""
    Count = _counter()
    task = common.DummyTask(temperature=0.7, top_k=50, top_p=0.9)
    engine.load([0], [task])
    engine.prefill([0], [list(range(5, 100))], first={0})
    engine.start([0], [99], [10 * steps])
    engine.pulse(1)
    total = Count()
    with _apart(engine.model, "decode", Count()) as in_model, total:
        engine.pulse(steps)
    engine.free([0])
    return total.n / steps, in_model.n / steps


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench host", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--target", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--steps", type=int, default=32)
    args = p.parse_args(argv)
    n, plain, reusing = tokenise_ms(args.turns, args.target, args.repeat)
    engine = tiny_engine()
    all_ops, model_ops = ops_per_step(engine, args.steps)
    print(common.table(["measure", "result"], [
        [f"tokenise the last turn ({n} tokens), Tokenizer.encode", f"{plain:.2f} ms"],
        ["the same, ReusingEncoder after the previous turns", f"{reusing:.2f} ms"],
        [f"torch ops a step, pulse of {args.steps} (sampled row)", f"{all_ops:.1f}"],
        ["of them in the model's decode", f"{model_ops:.1f}"],
        ["outside the model (eager on CUDA too)", f"{all_ops - model_ops:.1f}"]]), flush=True)
    print()
    print(common.table(["prompt tokens", "prefix_hashes ms", "32 common prefixes, equal, ms",
                        "32 common prefixes, parting at 50, ms"],
                       [[n, f"{h:.2f}", f"{e:.2f}", f"{d:.2f}"]
                        for n, h, e, d in prefix_ms((2000, 32768, 131072), args.repeat)]),
          flush=True)
    rows = []
    for temp, kind in ((0.0, "greedy"), (0.7, "sampled")):
        counts = request_ops(engine, temp)
        rows.append([kind, *(str(v) for v in counts.values()), str(sum(counts.values()))])
    print()
    print(common.table(["request's way to its first token: torch ops (model apart)", "load",
                        "prefill", "start", "first pulse", "all"], rows), flush=True)


if __name__ == "__main__":
    main()
