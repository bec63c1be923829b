from h import *
from server.api.splitter import OutputSplitter
sp = OutputSplitter("text"); out = sp.feed("x = 1\n\nUser: y\n"); out += sp.finish("length")
print("splitter text mode:", [p.text for p in out], "stopped", sp.stopped)
pre = ["def a():\n", "import os\n"]; suf = "\nreturn 1\n"
j = post("/v1/completions", {"prompt": pre, "suffix": suf, "max_tokens": 3, "temperature": 0, "n": 2})[1]
print(j["usage"], sum(len(TOK.encode(fim(p, suf))) for p in pre), [c["index"] for c in j["choices"]])
