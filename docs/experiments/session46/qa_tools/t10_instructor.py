import instructor, openai
from typing import List, Literal
from pydantic import BaseModel, Field
c = instructor.from_openai(openai.OpenAI(base_url="http://localhost:8792/v1", api_key="x", max_retries=0), mode=instructor.Mode.TOOLS)
class Flat(BaseModel):
    unit: Literal["c", "f"]
    n: int = Field(ge=0, le=9)
class Pt(BaseModel):
    x: int = Field(ge=0, le=9)
class Nested(BaseModel):
    pts: List[Pt] = Field(max_length=2)
for M in (Flat, Nested):
    try:
        r = c.chat.completions.create(model="rwkv-7", response_model=M, messages=[{"role": "user", "content": "go"}], max_tokens=100, max_retries=0)
        print(M.__name__, "->", repr(r))
    except Exception as e:
        print(M.__name__, "EXC", type(e).__name__, str(e)[:300])
