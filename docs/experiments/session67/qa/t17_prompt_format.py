import sys; sys.path.insert(0,"/tmp/qa67")
from common import *
def chat(msgs, **kw):
    r=c.post("/v1/chat/completions", json={"model":"rwkv-7","messages":msgs,"temperature":0,"max_tokens":8,"presence_penalty":0,**kw}).json()
    m=r["choices"][0]["message"]; return (m.get("content"), m.get("reasoning_content")), r["usage"]["prompt_tokens"]
def comp(p):
    r=c.post("/v1/completions", json={"model":"rwkv-7","prompt":p,"temperature":0,"max_tokens":8,"presence_penalty":0}).json()
    return r["choices"][0]["text"], r["usage"]["prompt_tokens"]
msgs=[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi\n\nthere  "}]
print("chat none:", chat(msgs, reasoning_effort="none"))
print("comp direct:", comp("System: Be brief.\n\nUser: Hi\nthere\n\nAssistant: <think>\n</think"))
print("chat think:", chat(msgs))
print("comp think:", comp("System: Be brief.\n\nUser: Hi\nthere\n\nAssistant: <think"))
h1=[{"role":"user","content":"a"},{"role":"assistant","content":"<think>long reasoning here</think>ok"},{"role":"user","content":"b"}]
h2=[{"role":"user","content":"a"},{"role":"assistant","content":"ok","reasoning_content":"zzz"},{"role":"user","content":"b"}]
print("hist think-stripped:", chat(h1, reasoning_effort="none"), "vs", chat(h2, reasoning_effort="none"))
print("comp hist:", comp("User: a\n\nAssistant: ok\n\nUser: b\n\nAssistant: <think>\n</think"))
