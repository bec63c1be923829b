import openai, json, time, httpx
cl=openai.OpenAI(base_url="http://localhost:8791/v1", api_key="sk-anything", max_retries=0)
print("models:", [m.id for m in cl.models.list()])
r=cl.chat.completions.create(model="rwkv-7", messages=[{"role":"user","content":"Hi"}], max_tokens=8, seed=9, reasoning_effort="none")
print("chat:", r.choices[0].message.content, r.choices[0].finish_reason, r.usage)
s=cl.chat.completions.create(model="rwkv-7", messages=[{"role":"user","content":"Hi"}], max_tokens=8, seed=9, reasoning_effort="none", stream=True, stream_options={"include_usage":True})
txt="";u=None
for ch in s:
    if ch.choices: txt+=ch.choices[0].delta.content or ""
    if ch.usage: u=ch.usage
print("stream:", txt==r.choices[0].message.content, u)
c=cl.completions.create(model="rwkv-7", prompt=["a","b"], max_tokens=4, n=2)
print("completions:", [(x.index, x.text) for x in c.choices])
for kw in [dict(messages=[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]),
           dict(messages=[{"role":"user","content":"x"*10}], temperature=5),
           dict(messages=[{"role":"user","content":"hello "*140000}])]:
    try:
        cl.chat.completions.create(model="rwkv-7", max_tokens=2, **kw)
    except openai.APIStatusError as e:
        print("error:", type(e).__name__, e.status_code, e.code, e.param, str(e.message)[:100])
# tools via SDK streaming
tools=[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris"]}},"required":["city"],"additionalProperties":False}}}]
s=cl.chat.completions.create(model="rwkv-7", messages=[{"role":"user","content":"Hi"}], tools=tools, tool_choice="required", stream=True, reasoning_effort="none", max_tokens=100)
parts=[ch.choices[0].delta.tool_calls for ch in s if ch.choices and ch.choices[0].delta.tool_calls]
print("sdk tool stream:", parts)
# langchain-ish: max_completion_tokens with stream and n
s=cl.chat.completions.create(model="rwkv-7", messages=[{"role":"user","content":"Hi"}], max_completion_tokens=3, stream=True)
print("mct stream chunks:", sum(1 for _ in s))
# async client + with_raw_response headers
raw=cl.chat.completions.with_raw_response.create(model="rwkv-7", messages=[{"role":"user","content":"Hi"}], max_tokens=2)
print("headers:", dict(raw.headers))
