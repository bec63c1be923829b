"""Shared fixtures. Tests run on the CPU with random checkpoints in the published layout."""

import os

# Two cores shared by pytest, test servers and their clients: OpenMP's spinning worker threads
# slow tiny CPU ops ~10x under such contention, so each process uses one thread.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Each test server, interpreted kernel script and command-line run is a new Python importing
# torch. With PYTHONDONTWRITEBYTECODE set (this machine and CI) over an environment installed
# without bytecode (uv's default), each compiled every module from source: ``import torch,
# triton`` took 3.4 s instead of 2.0 (a server start ~5.4 s instead of ~3.7). The processes
# started from here (xdist's workers, and theirs) share a bytecode cache outside the tree.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    import tempfile

    os.environ.setdefault("PYTHONPYCACHEPREFIX",
                          os.path.join(tempfile.gettempdir(), "rwkv-server-test-pycache"))

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

MAX_WORKERS = 4  # pytest-xdist workers for ``-n auto`` (pyproject's addopts)


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: a worker process per core (at most MAX_WORKERS: each loads torch and
    starts test servers), so two cores run the CPU suite in ~8 minutes instead of ~15.5
    (README). None (one process) for the CUDA tests (``-m gpu``): their models share one
    GPU's memory."""
    expr = config.option.markexpr or ""
    if "gpu" in expr and "not gpu" not in expr:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, cores or 1))


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> str:
    """A random ``tiny`` checkpoint (L2 C128, full 65536 vocabulary), written once per session."""
    from server.model.random import main as make_random

    path = tmp_path_factory.mktemp("models") / "rwkv7-tiny-random.pth"
    make_random([str(path), "--preset", "tiny", "--seed", "1"])
    return str(path)


@pytest.fixture(scope="session")
def tiny_loader(tiny_model_path):
    """The real loader on the tiny checkpoint (CPU, fp32)."""
    from server.model.loader import RWKV070ModelLoader

    return RWKV070ModelLoader(tiny_model_path, device="cpu")


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """The world tokenizer (the servers' own vocabulary file)."""
    from server.model.tokenizer import Tokenizer

    return Tokenizer()


# ---- a real server (python run.py) in a subprocess: see server_harness.py ------------------
@pytest.fixture(scope="session")
def start_server(tiny_model_path, tmp_path_factory):
    """Factory ``start_server(db_path=None, model=None, **env) -> ServerProcess`` (started and
    healthy, CPU, own database unless ``db_path``); servers still running at the end of the
    session are stopped."""
    from server_harness import ServerProcess

    started = []

    def start(db_path=None, model=None, **env):
        d = tmp_path_factory.mktemp("server")
        srv = ServerProcess(model or tiny_model_path, db_path or d / "tasks.db",
                            d / "server.log", **env)
        started.append(srv)
        return srv.start()

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture(scope="session")
def server(start_server):
    """One server on the tiny checkpoint shared by the session (``.url``, ``.restart()`` keeps
    the port and database)."""
    return start_server()


@pytest.fixture(scope="session")
def server_url(server) -> str:
    return server.url


@pytest.fixture(scope="module")
def http(server_url):
    """An ``httpx.Client`` for the shared server."""
    import httpx

    with httpx.Client(base_url=server_url, timeout=30) as c:
        yield c


@pytest.fixture
def held_copyback(monkeypatch):
    """The copy-back thread's device -> host copy waits until the returned event is set (10 s
    at most): a finished task's state is "on its way home" meanwhile."""
    import threading

    import server.scheduler.copyback as copyback

    gate, real = threading.Event(), copyback.to_host

    def held_to_host(*args):
        gate.wait(10)
        return real(*args)

    monkeypatch.setattr(copyback, "to_host", held_to_host)
    return gate


# the longest tests (Triton's CPU interpreter: 10-95 s each on a 2-core machine, none with a
# module-scoped fixture that moving it would start twice) run first: pytest-xdist hands tests
# out in collection order, and one of these started late kept one worker busy alone at the end
LONG_FIRST = ("interpret", "test_fused_topk_is_torch_topk",
              "test_sample_through_the_cuda_kernels_is_the_torch_path")


def pytest_collection_modifyitems(config, items) -> None:
    items.sort(key=lambda item: not any(name in item.name for name in LONG_FIRST))
