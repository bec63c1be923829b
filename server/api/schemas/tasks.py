"""Task API bodies and replies (API.md §1).

Request bodies forbid unknown fields (a typo is a 422 naming it). Every generation field is
optional: on create/tmp an absent field takes the server default (``RWKV_DEFAULT_*``), on
fork/continue it keeps the task's current value. Token-id ranges and prompt lengths depend on the
loaded model and are checked by the routes.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
MAX_TOKENS_LIMIT = 40960

# body field -> Task attribute (the same names)
SAMPLING_KEYS = ("max_tokens", "temperature", "top_k", "top_p", "presence_penalty",
                 "repetition_penalty", "penalty_decay", "seed", "min_p")


def whole_number(value):
    """A float with no fraction as the int it is (Python's json writes ``5.0`` for a computed
    count; strict, that was a 422); anything else as given, for the strict check."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# an integer field: a JSON integer, or a number with no fraction (not true, not "5")
WholeInt = Annotated[int, BeforeValidator(whole_number)]


def _null_is(default):
    """``null`` as the field's default, as for the sampling fields (whose ``None`` means
    "the default"): ``"stream": null`` was a 422 and ``"max_tokens": null`` not (session
    40's QA)."""
    return BeforeValidator(lambda value: default if value is None else value)


class _Body(BaseModel):
    # strict: a value of another JSON type is a 422 naming its field (``true`` was read as
    # max_tokens 1, ``"yes"`` as a stream); a float field still takes a JSON integer
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class GenerationParams(_Body):
    """Sampling parameters shared by every create-like body."""

    # at most MAX_TOKENS_LIMIT, or RWKV_MAX_TOKENS_CAP when that is higher (a setting: checked
    # by ``TaskService.sampling``)
    max_tokens: WholeInt | None = Field(None, ge=0, description="0 = prefill only (template "
                                        f"mode); at most {MAX_TOKENS_LIMIT} or "
                                        "RWKV_MAX_TOKENS_CAP if higher")
    temperature: float | None = Field(None, ge=0, le=2, description="0 = greedy")
    top_k: WholeInt | None = Field(None, ge=-1, le=2**31 - 1, description="-1 or 0 = off")
    top_p: float | None = Field(None, ge=0, le=1)
    min_p: float | None = Field(None, ge=0, le=1, description="0 = off: tokens less likely "
                                "than min_p times the most likely one are not drawn")
    presence_penalty: float | None = Field(None, ge=0, le=10)
    repetition_penalty: float | None = Field(None, ge=0, le=10)
    penalty_decay: float | None = Field(None, ge=0, le=1)
    stream: Annotated[bool, _null_is(False)] = False
    seed: WholeInt | None = Field(None, ge=I64_MIN, le=I64_MAX, description="null = random")
    # this round's only (not stored; checked by TaskService.round_settings): OpenAI's forms
    logit_bias: dict[str, Any] | None = Field(None, description="token id -> bias in [-100, "
                                              "100] added to its logit; at most 300")
    response_format: dict[str, Any] | None = Field(None, description="{\"type\": "
                                                   "\"json_object\" | \"json_schema\", ...}: "
                                                   "the reply is JSON (matching the schema)")

    def sampling(self) -> dict:
        """The sampling fields that were given (absent ones left out)."""
        return {k: getattr(self, k) for k in SAMPLING_KEYS if getattr(self, k) is not None}


# Token ids are checked by the routes (``TaskService.encode``: integers in the vocabulary), after
# the list's length: typed ``list[StrictInt]`` here, a body of a million ids was validated item
# by item before any limit, and a million non-integers made a million errors (a 119 MB 422 reply,
# ~20 s of the event loop; a review, session 14)
TokenIds = Annotated[list[Any], WithJsonSchema({"type": "array", "items": {"type": "integer"}})]
Prompt = str | TokenIds


class CreateRequest(GenerationParams):
    """Body of ``POST /tmp`` and ``POST /create``: ``prompt`` is required and non-empty."""

    prompt: Prompt = Field(description="text, or a list of token ids")


class ContinueRequest(GenerationParams):
    """Body of ``POST /{id}/continue`` and ``POST /{id}/fork``: everything optional."""

    prompt: Prompt | None = Field(None, description="appended to the task before generating")


class FimRequest(GenerationParams):
    """Body of ``POST /fim``: prompt ``✿prefix✿✿suffix✿{suffix}✿middle✿{prefix}``."""

    prefix: str
    suffix: Annotated[str, _null_is("")] = ""


class TaskResponseModel(BaseModel):
    task_id: str
    result: str
    prefill_time: float
    gen_time: float
    speed: float
    finished: bool


class TaskInfo(BaseModel):
    task_id: str
    generated_buf: int = Field(description="tokens generated so far")
    status: int = Field(description="0 PREFILL, 1 READY, 2 RUNNING, 3 FINISHED")


class TaskList(BaseModel):
    cpu_cache_count: int
    database_count: int
    total_count: int
    cpu_tasks: list
    db_tasks: list
