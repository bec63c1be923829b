from openai import OpenAI

client = OpenAI(
    base_url="http://localhost:8792/v1",
    api_key="sk-local",
)

# 非流式
response = client.chat.completions.create(
    model="rwkv-7",
    messages=[{"role": "user", "content": "你好！"}],
    temperature=0.7,
    max_tokens=500,
)
print(repr(response.choices[0].message.content))
print("reasoning len", len(getattr(response.choices[0].message, "reasoning_content", "") or ""), response.choices[0].finish_reason, response.usage)

# 流式
stream = client.chat.completions.create(
    model="rwkv-7",
    messages=[{"role": "user", "content": "讲个笑话"}],
    stream=True,
)
n=0
for chunk in stream:
    n+=1
    if chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content, end="", flush=True)
print("\nchunks", n)

response = client.chat.completions.create(
    model="rwkv-7",
    messages=[
        {"role": "system", "content": "你是一个专业的技术翻译，请将英文翻译为中文。"},
        {"role": "user", "content": "LLMs use multi-head self-attention to process tokens in parallel."},
    ],
)
print(repr(response.choices[0].message.content), response.usage, response.choices[0].finish_reason)
