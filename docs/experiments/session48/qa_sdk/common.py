import openai, json, time, math
from typing import Literal, Optional, List
from pydantic import BaseModel, Field, conlist
client = openai.OpenAI(base_url="http://localhost:8791/v1", api_key="sk-local", max_retries=0, timeout=300)
M = "rwkv-7"
def msgs(t="Give me the answer as JSON"): return [{"role": "user", "content": t}]

class Addr(BaseModel):
    city: Literal["Paris", "Rome", "Oslo"]
    zip: int
class Person(BaseModel):
    kind: Literal["a", "b", "c"]
    age: int
    ok: bool
    addr: Addr
    tags: List[Literal["x", "y", "z"]] = Field(max_length=3)
class Small(BaseModel):
    color: Literal["red", "green", "blue"]
    n: int
    flag: bool
