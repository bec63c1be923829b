"""Log probabilities on CUDA (server/scheduler/logprobs.py): gathered from the decode graph's
borrowed logits and from a prompt's kept logits, in a batch whose capacity changes; each entry
the log-softmax of the logits a fresh prefill of that prefix gives (fp16 weights: within their
rounding)."""

import pytest
import torch

from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_logprobs_on_cuda_match_a_prefill_of_each_prefix(tiny_model_path):
    loader = RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")
    sched = DynamicScheduler(loader, max_batch_size=8, buffer_size=4)
    prompts = [[100 + 3 * i + j for j in range(10 + 9 * i)] for i in range(5)]
    tasks = []
    for i, p in enumerate(prompts):
        task = sched.new_task(list(p), max_tokens=4 + 3 * i,
                              **(dict(temperature=0.0) if i % 2 else
                                 dict(temperature=1.0, top_k=0, top_p=1.0, seed=i)))
        task.logprobs = None if i == 1 else 3
        tasks.append(task)
    sched.run()
    m = loader.model
    for i, (task, p) in enumerate(zip(tasks, prompts)):
        if i == 1:
            assert task.output_logprobs == []
            continue
        assert len(task.output_logprobs) == len(task.output) > 0
        for s, (tok, (lp, ids, vals)) in enumerate(zip(task.output, task.output_logprobs)):
            ref = torch.log_softmax(m.prefill([p + task.output[:s]], m.new_state(1))[0]
                                    .double(), -1).cpu()
            assert lp == pytest.approx(ref[tok].item(), abs=0.05), (i, s)
            assert len(ids) == 3 and vals == sorted(vals, reverse=True)
            assert vals[0] == pytest.approx(ref.max().item(), abs=0.05)
            if i % 2:  # greedy: the chosen token is the most likely one
                assert (ids[0], vals[0]) == (tok, lp)


def test_scoring_on_cuda_matches_a_prefill_of_each_prefix(tiny_model_path):
    """``RWKV7.score`` through the fused forward (every position's residual) and the
    scheduler's scoring job, in passes of 16 tokens: each token's logprob after the ones
    before it, as a prefill of that prefix gives it."""
    loader = RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")
    sched = DynamicScheduler(loader, max_batch_size=2, buffer_size=4, prefill_chunk=16)
    seq = [100 + (7 * j) % 900 for j in range(41)]
    fut = sched.score(seq, top=3)
    sched.run()
    entries = fut.result(timeout=0)
    assert len(entries) == len(seq) - 1
    m = loader.model
    for i, (lp, ids, vals) in enumerate(entries, 1):
        ref = torch.log_softmax(m.prefill([seq[:i]], m.new_state(1))[0].double(), -1).cpu()
        assert lp == pytest.approx(ref[seq[i]].item(), abs=0.05), i
        assert len(ids) == 3 and vals[0] == pytest.approx(ref.max().item(), abs=0.05)


def test_logit_bias_on_cuda_through_the_kept_logits_and_the_decode_graph(tiny_model_path):
    """Biased rows beside plain ones on CUDA: +100 on a token (sampled, top-k 50: the Triton
    top-k draw) gives that token at every step, from the prompt's kept logits on; a greedy
    row banning the plain reply's first token starts with the next most likely one; the
    plain rows reply as they do alone."""
    loader = RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")
    prompts = [[200 + 5 * i + j for j in range(12 + 7 * i)] for i in range(4)]
    alone = DynamicScheduler(loader, max_batch_size=1, buffer_size=4)
    solo = [alone.new_task(list(p), max_tokens=6, temperature=0.0) for p in prompts]
    alone.run()
    sched = DynamicScheduler(loader, max_batch_size=4, buffer_size=4)
    tasks = [sched.new_task(list(p), max_tokens=6, temperature=0.0) for p in prompts[:2]]
    lifted = sched.new_task(list(prompts[2]), max_tokens=9, temperature=1.0, top_k=50,
                            top_p=0.9, seed=7)
    lifted.logit_bias = {4000: 100.0}
    banned = sched.new_task(list(prompts[3]), max_tokens=6, temperature=0.0)
    banned.logit_bias = {solo[3].output[0]: -100.0}
    sched.run()
    assert [t.output for t in tasks] == [t.output for t in solo[:2]]
    assert lifted.output == [4000] * 9
    m = loader.model
    x = m.prefill([prompts[3]], m.new_state(1))[0].float()
    assert banned.output[0] == int(torch.topk(x, 2).indices[1])
