# Compare usage.prompt_tokens with the tokenizer length of the prompt OPENAI_COMPAT.md §2 describes.
import httpx
from server.model.tokenizer import Tokenizer
tok=Tokenizer("eof_v20230424.txt")
U="http://localhost:8791/v1"
c=httpx.Client(timeout=60)
cases=[
 ([{"role":"system","content":"Be brief.  "},{"role":"user","content":"Line1\n\nLine2   \n\n\nLine3"}], "System: Be brief.\n\nUser: Line1\nLine2\nLine3"),
 ([{"role":"developer","content":"dev"},{"role":"user","content":"Hi"}], "System: dev\n\nUser: Hi"),
 ([{"role":"user","content":"Hi"},{"role":"assistant","content":"<think>secret stuff</think>Hello there","reasoning_content":"zzz"},{"role":"user","content":"Again"}], "User: Hi\n\nAssistant: Hello there\n\nUser: Again"),
 ([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}], "User: a\nb"),
]
for think in ("none","high"):
    for msgs, exp in cases:
        full=exp+"\n\nAssistant:"+(" <think>\n</think" if think=="none" else " <think")
        r=c.post(U+"/chat/completions", json={"model":"x","messages":msgs,"max_tokens":1,"reasoning_effort":think}).json()
        n=len(tok.encode(full))
        print(think, r["usage"]["prompt_tokens"], n, "OK" if r["usage"]["prompt_tokens"]==n else "DIFF", repr(full[:60]))
