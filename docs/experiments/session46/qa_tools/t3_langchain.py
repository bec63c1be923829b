from typing import Literal, Optional, List
from pydantic import BaseModel, Field
from langchain_openai import ChatOpenAI
llm = ChatOpenAI(base_url="http://localhost:8792/v1", api_key="x", model="rwkv-7", max_tokens=300, max_retries=0, temperature=0.8, seed=1)
class Weather(BaseModel):
    """Weather query"""
    city: str = Field(max_length=12)
    unit: Literal["c", "f"]
    days: Optional[int] = None
class Pt(BaseModel):
    x: int = Field(ge=0, le=9)
    y: int = Field(ge=0, le=9)
class Path(BaseModel):
    """A path"""
    name: Literal["p", "q"]
    points: List[Pt] = Field(max_length=3)
for M in (Weather, Path):
    for method in ("function_calling", "json_schema", "default"):
        kw = {} if method == "default" else {"method": method}
        try:
            s = llm.with_structured_output(M, **kw)
            out = s.invoke("give me one")
            print(M.__name__, method, "->", repr(out))
        except Exception as e:
            print(M.__name__, method, "EXC", type(e).__name__, str(e)[:300])
        try:
            s = llm.with_structured_output(M, include_raw=True, **kw)
            out = s.invoke("give me one")
            print("   include_raw parsing_error:", out["parsing_error"], "parsed:", out["parsed"])
        except Exception as e:
            print("   include_raw EXC", type(e).__name__, str(e)[:300])
# bind_tools with tool_choice
t = llm.bind_tools([Weather, Path], tool_choice="any")
m = t.invoke("go"); print("bind_tools any:", m.tool_calls, m.invalid_tool_calls)
t = llm.bind_tools([Weather, Path], tool_choice="Path")
m = t.invoke("go"); print("bind_tools Path:", m.tool_calls, m.invalid_tool_calls)
# streaming structured output
s = llm.with_structured_output(Weather)
print("stream:", list(s.stream("give"))[-1:])
