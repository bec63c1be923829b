from common import *
class GetWeather(BaseModel):
    """Get the weather for a city"""
    city: Literal["Paris", "Rome", "Oslo"]
    unit: Literal["c", "f"]
    addr: Addr
    days: List[int] = Field(max_length=2)
