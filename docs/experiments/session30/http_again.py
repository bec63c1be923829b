"""Session 30 (docs/performance.md): a tiny demo server in this process under uvicorn with the
given HTTP protocol and event loop, and ``http_again_client.py`` in a subprocess sending one chat
request (a whole-prompt cache hit after the first) 100 times: client TTFT median and quartiles.
From the repository root:
    OMP_NUM_THREADS=1 uv run --with httptools --with uvloop python \
        docs/experiments/session30/http_again.py h11t|httptools asyncio|uvloop 100 [runs]
(``h11t``: the served h11 protocol with its header timeout)."""
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402

from server.api.app import create_app  # noqa: E402
from server.api.http_protocol import with_header_timeout  # noqa: E402
from server.bench.chat import free_port, wait_until_served  # noqa: E402
from server.config import Settings  # noqa: E402

http, loop, n = sys.argv[1], sys.argv[2], sys.argv[3]
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 1
tmp = tempfile.TemporaryDirectory()
port = free_port()
app = create_app(Settings(demo="tiny", port=port, task_db_path=str(Path(tmp.name) / "t.db")),
                 freeze_heap=True)
config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, loop=loop,
                        http=with_header_timeout(30) if http == "h11t" else http)
server = uvicorn.Server(config)
thread = threading.Thread(target=server.run, daemon=True)
thread.start()
url = f"http://127.0.0.1:{port}"
wait_until_served(url, seconds=600)
client = Path(__file__).with_name("http_again_client.py")
for _ in range(runs):
    r = subprocess.run([sys.executable, str(client), url, n], capture_output=True, text=True)
    print(http, loop, r.stdout.strip(), r.stderr[-300:], flush=True)
server.should_exit = True
thread.join(30)
