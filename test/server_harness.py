"""A real RWKV-Server (``python run.py``) in a subprocess, for tests that talk HTTP.

The server runs on the CPU on a free loopback port, with its task database at ``db_path``; its
output goes to ``log_path``. ``restart()`` keeps the port and the database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 20
# small pulses and batches: streams come in several chunks and CPU runs stay quick
SERVER_ENV = {"RWKV_DEVICE": "cpu", "RWKV_BUFFER_SIZE": "8", "RWKV_MAX_BATCH_SIZE": "16",
              "RWKV_VERBOSE": "true", "OMP_NUM_THREADS": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python run.py --model M --port P`` with ``RWKV_TASK_DB_PATH=db_path`` and ``env``."""

    def __init__(self, model, db_path: Path, log_path: Path, **env: str):
        self.model, self.db_path, self.log_path = str(model), Path(db_path), Path(log_path)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("RWKV_")}
        self.env = {**inherited, **SERVER_ENV, "RWKV_TASK_DB_PATH": str(db_path), **env}
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServerProcess:
        """Start the process and wait until ``/health`` answers."""
        cmd = [sys.executable, "run.py", "--model", self.model, "--host", "127.0.0.1",
               "--port", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop(signal.SIGKILL)
        raise RuntimeError(f"server did not become healthy in {START_TIMEOUT_S}s:\n{self.log()}")

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """Signal the server (SIGTERM: graceful, SIGKILL: crash) and wait; its exit code."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def restart(self, sig: int = signal.SIGTERM) -> ServerProcess:
        """Stop (with ``sig``) and start again on the same port and database."""
        self.stop(sig)
        return self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
