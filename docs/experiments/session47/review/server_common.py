import sys, tempfile
sys.path.insert(0, "/tmp/qa_review/repo/test")
from common import loader, PATH
loader()  # make the checkpoint
from openai_helpers import LiveServer
from server.config import Settings
import httpx
def live(**kw):
    d = tempfile.mkdtemp()
    s = Settings(model_path=PATH, demo=None, device="cpu", task_db_path=d + "/tasks.db",
                 api_key=None, chat_think=False, verbose=False, **kw)
    return LiveServer(s)
