"""Finished tasks' state comes home through the copy-back thread intact: on the CPU, and on
CUDA (pinned memory, side stream) while graphs are captured for new capacities."""

import pytest
import torch

from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler
from server.task.task import Status

CUDA = pytest.param("cuda", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")])


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_copy_back_brings_exact_state_home(tiny_model_path, device):
    gpu = RWKV070ModelLoader(tiny_model_path, device=device, dtype="fp32")
    sched = DynamicScheduler(gpu, max_batch_size=16, buffer_size=4)
    prompts = [gpu.encode(f"User: question {i}" + " more" * i + "\n\nAssistant:") for i in range(12)]
    tasks = [sched.new_task(p, max_tokens=3 + i, temperature=0) for i, p in enumerate(prompts)]
    sched.run()  # capacities 16 -> ... -> 1: graphs captured while copies are in flight
    for task, p in zip(tasks, prompts):
        assert task.status == Status.FINISHED and task.state.device.type == "cpu"
        ref = gpu.model.new_state(1)
        gpu.model.prefill([task.history], ref)  # the tokens the state should have consumed
        torch.testing.assert_close(task.state.wkv, ref.wkv.cpu(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(task.state.shift, ref.shift.cpu(), rtol=1e-4, atol=1e-5)
        assert task.history[: len(p) - 1] == p[:-1]
    sched.shutdown()
