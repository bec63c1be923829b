"""Settings: every knob is an environment variable with the ``RWKV_`` prefix (12-factor).

This module is the one place settings are read, but for ``RWKV_PDL``, which the kernels read
from the environment when they are built (``server/model/kernels/pdl.py``; validated here).
Edit the defaults here if you prefer not to set environment variables. Bad values fail at
start-up with a message naming the variable.
"""

import re
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RWKV_", extra="ignore")

    # model
    model_path: str = "server/model/rwkv7-g1g-2.9b-20260526-ctx8192.pth"
    vocab_path: str = str(ROOT / "eof_v20230424.txt")
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    dtype: Literal["auto", "fp16", "bf16", "fp32"] = "auto"
    state_dtype: Literal["fp32", "fp16", "bf16"] = "fp32"
    fused: bool = Field(True, description="fused Triton element-wise kernels on CUDA (false: plain torch)")
    split_invariant: bool = Field(
        True, description="prefill gives the same bits however a prompt is cut into passes at "
        "multiples of the WKV chunk (16 tokens on CUDA, 32 on the CPU), and the prefix state "
        "cache resumes prompts only there: it changes no output (greedy or seeded). false: a "
        "cached turn prefills up to 15 (31) fewer tokens and prefill on CUDA is a few % faster, "
        "but cached prompts may differ from uncached ones in the last bits (and at near-ties, in "
        "the tokens)")
    pdl: bool = Field(True, description="programmatic dependent launch of the small-batch decode "
                      "kernels on CUDA compute capability >= 9.0 (read from the environment by "
                      "server/model/kernels/pdl.py; validated here)")
    warmup: bool = Field(True, description="on CUDA, compile kernels and capture every decode "
                         "and prefill graph at start (slot memory for RWKV_MAX_BATCH_SIZE is "
                         "allocated then) instead of in the first requests")
    demo: str | None = Field(None, description="serve random weights of this preset (tiny, 0.1b, ...)")

    # scheduler
    max_batch_size: int = Field(256, ge=1, le=65536)
    buffer_size: int = Field(32, ge=1, le=4096)
    admit_wait_steps: int = Field(4, ge=0, le=4096, description="decode steps a pulse still "
                                  "runs once a new request could be admitted; a pulse also "
                                  "ends after max(this, RWKV_BUFFER_SIZE / 4) steps while a "
                                  "prompt longer than a step's prefill is fed (0: every pulse "
                                  "runs out, up to RWKV_BUFFER_SIZE steps)")
    # at least the WKV prefill's chunk (32 tokens on the CPU, 16 on CUDA): the prefiller then
    # cuts prompts only at its multiples, and a cached state has an uncached run's bits (a
    # smaller step budget cut anywhere; session 27's QA: refused now, it was a warning)
    prefill_chunk: int = Field(0, description="prompt tokens prefilled per scheduler step (at "
                               "least 32); 0 or auto: 4096 on CUDA, 512 on the CPU (a step's "
                               "prefill holds up the other tasks' next pulse)")
    # a batched pass's transient device memory grows with it (README, "GPU memory"); fewer
    # tokens cost batched prefill throughput (docs/levers.md). At most 65,536: the CUDA
    # kernels' offsets into a pass's stacked activations (up to 5 rows x C, ln_mix) are 32-bit,
    # 2^31 at ~105k rows for C = 4,096 (session 68's review)
    prefill_tokens: int = Field(16384, ge=32, le=65536, description="tokens (rows x padded "
                                "width) one batched prefill pass holds at most; lower it where "
                                "GPU memory is short (a pass holds at least one prompt's piece "
                                "of the model's chunk: 1,024 tokens on CUDA, 256 on the CPU)")
    # finished requests' states gathered on the device on their way home (copyback.py): 256 MiB
    # since session 66 (H100, 2.9B, the seed's stress test, alternating: 84 / 86 % of its peak
    # against 85 / 86 % at 1,024, peak 9.0 GB allocated against 9.3, 9.7 reserved against 10.5)
    copyback_mb: int = Field(256, ge=1, description="MiB of finished requests' states "
                             "gathered on the GPU and not yet copied to host memory, at most; "
                             "lower it where GPU memory is short (the scheduler then waits "
                             "for the copy when many requests end at once)")
    max_queue: int = Field(4096, ge=1, description="tasks waiting for a slot beyond this "
                           "get 503")
    max_prompt_tokens: int = Field(131072, ge=1)
    max_tokens_cap: int = Field(40960, ge=1, le=2**63 - 1)  # (the Task API's range reaches it)

    # sampling defaults
    default_max_tokens: int = Field(2000, ge=1, le=2**63 - 1)  # (Task.check_params' ranges)
    default_temperature: float = Field(1.0, ge=0, le=2)
    default_top_p: float = Field(0.3, ge=0, le=1)
    default_top_k: int = Field(50, ge=-1, le=2**31 - 1)
    default_min_p: float = Field(0.0, ge=0, le=1)  # 0 = off
    default_presence_penalty: float = Field(2.0, ge=0, le=10)
    default_repetition_penalty: float = Field(0.0, ge=0, le=10)
    default_penalty_decay: float = Field(1.0, ge=0, le=1)

    # task store
    task_default_cpu_capacity: int = Field(300, ge=1)
    task_db_max_size: int = Field(10000, ge=1)
    task_db_max_mb: int = Field(20480, ge=0, description="megabytes of stored non-template "
                                "tasks (their states, all told) beyond which the oldest are "
                                "pruned (the newest is kept, even alone over it); 0 = no "
                                "limit")
    task_async_queue_size: int = Field(200, ge=1)
    task_db_path: str = Field("rwkv_tasks.db", min_length=1, description="the SQLite file of "
                              "tasks and templates (\":memory:\": none, nothing survives a "
                              "restart)")
    max_templates: int = Field(256, ge=0, description="stored templates at which the HTTP "
                               "API makes no more (as_template, import_state: 409); each holds "
                               "a whole state in memory and on disk; 0 = no limit")
    state_cache_mb: int = Field(1024, ge=0, description="prefix state cache (MB); 0 = off")
    state_cache_device_fraction: float = Field(
        0.5, ge=0, le=1, description="share of the prefix cache kept in GPU memory (rest: host)")

    # server
    gil_switch_us: int = Field(100, ge=1, le=1_000_000, description="the interpreter's GIL "
                               "hand-over interval while serving (sys.setswitchinterval, in "
                               "µs; Python's default is 5000): how soon the scheduler thread "
                               "gets the GIL back from the HTTP event loop")
    gc_threshold: int = Field(50_000, ge=0, le=10_000_000, description="the garbage "
                              "collector's generation-0 threshold while serving (gc."
                              "set_threshold; Python's default is 700; 0 turns automatic "
                              "collection off): collections every few requests delayed "
                              "their first tokens")
    host: str = "0.0.0.0"
    port: int = Field(8000, ge=1, le=65535)
    api_key: str | None = None
    cors_origins: str = "*"
    chat_think: bool = Field(True, description="default thinking switch for chat prompts")
    chat_inline_think: bool = Field(
        False, description="send reasoning inline as <think>…</think> in content (for clients "
        "such as LangChain that drop reasoning_content) instead of reasoning_content")
    chat_warm_next_turn: bool = Field(
        True, description="after a chat reply, compute the prefix state its next turn starts "
        "with (the history with the reply, as clients re-send it) when the scheduler has time, "
        "so that turn prefills only its new message (needs the prefix cache)")
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    header_timeout_s: float = Field(20.0, gt=0, description="a connection that has not sent a "
                                    "whole request head this long after opening (or after its "
                                    "last reply), or whose request body stalls this long or "
                                    "averages under 500 bytes/s past it, is closed")
    verbose: bool = True

    @field_validator("*", mode="before")
    @classmethod
    def _no_stray_ends(cls, v, info):
        """A value with spaces or line breaks at its ends is refused, naming them: a CRLF env
        file's carriage return made RWKV_TASK_DB_PATH a new file whose name ends in one (the
        stored templates seemingly lost), and "Model file not found" named a file that exists
        (session 72's QA); numbers were stripped, names refused with puzzling messages. (The
        key has its own message; a value of spaces alone, its field's.)"""
        if isinstance(v, str) and v.strip() and v != v.strip() and info.field_name != "api_key":
            raise ValueError(f"has spaces or line breaks at its ends ({v!r}): remove them (an "
                             "env file with Windows line ends puts a carriage return in every "
                             "value)")
        return v

    @field_validator("device")
    @classmethod
    def _check_device(cls, v: str) -> str:
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", v):  # ("cuda:x" passed a prefix test and
            raise ValueError("must be auto, cpu, cuda or cuda:N")  # was a start-up traceback)
        return v

    @field_validator("host")
    @classmethod
    def _check_host(cls, v: str) -> str:
        if not v.strip():  # (uvicorn took it: "Uvicorn running on http://:8000"; session 31)
            raise ValueError("is empty (--host): name the address to listen on (0.0.0.0: every "
                             "interface, 127.0.0.1: this machine only)")
        return v

    @field_validator("prefill_chunk", mode="before")
    @classmethod
    def _auto_chunk(cls, v):
        return 0 if isinstance(v, str) and v.strip().lower() == "auto" else v

    @field_validator("prefill_chunk")
    @classmethod
    def _check_chunk(cls, v: int) -> int:
        if v != 0 and v < 32:
            raise ValueError("must be at least 32 (the WKV's chunk on the CPU), or 0 / auto "
                             "(by device)")
        return v

    @field_validator("demo")
    @classmethod
    def _empty_demo_is_none(cls, v: str | None) -> str | None:
        return v or None  # RWKV_DEMO= (how env files unset a variable) is no demo

    @field_validator("api_key")
    @classmethod
    def _check_api_key(cls, v: str | None) -> str | None:
        if v == "":  # (RWKV_API_KEY=${SECRET} with SECRET unset served every route open,
            # logging only "set RWKV_API_KEY to require one"; session 42's QA)
            raise ValueError("is set but empty: set a key, or unset the variable to serve "
                             "without one")
        # an env file's stray space or a CRLF line: no client's key could ever match it
        if v is not None and v != v.strip():
            raise ValueError("has spaces or line breaks at its ends: remove them (no client "
                             "could send it: HTTP strips header values)")
        return v

    @model_validator(mode="after")
    def _one_model_source(self):
        """A demo and a checkpoint path both set: which was meant is unknown (the demo was
        served, the path unread; a QA report, session 26)."""
        if self.demo is not None and "model_path" in self.model_fields_set:
            raise ValueError("RWKV_DEMO (random weights) and RWKV_MODEL_PATH (a checkpoint) "
                             "exclude each other: unset one")
        return self


def unknown_variables(environ) -> list[str]:
    """A warning for each ``RWKV_*`` variable that names no setting (a misspelt one is ignored
    silently otherwise: ``RWKV_MAX_BATCHSIZE=64`` served at the default), with the closest
    setting's name when there is one."""
    import difflib

    known = {f"RWKV_{name.upper()}" for name in Settings.model_fields}
    choices, notes = sorted(known), []
    for var in sorted(v for v in environ if v.upper().startswith("RWKV_") and v.upper() not in known):
        close = difflib.get_close_matches(var.upper(), choices, n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]}?" if close else " (see the settings in README.md)"
        notes.append(f"{var} is not a setting of this server and is ignored{hint}")
    return notes


# The CUDA caching allocator's configuration a served process gets unless the user gives one
# (PyTorch reads it at the first CUDA allocation). Expandable segments grow one mapping instead
# of caching a block per size met: a served 2.9B held 11.20 instead of 12.65 GiB of an H100
# after a load of 256 requests (session 60), the prefill passes' varying sizes no longer
# leaving ~2 GiB of cached blocks behind; speed A/Bs in docs/performance.md (sessions 61-62).
ALLOCATOR_DEFAULT = "expandable_segments:True"
ALLOCATOR_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
# cuBLAS's workspaces, one per stream that runs a product (four in a served process): PyTorch
# gives each 32 MiB on Hopper; 8 (cuBLAS, 2 x 4 MiB) and 4 MiB (cuBLASLt) instead held 176 MiB
# less on an H100 after a served 2.9B's start, with decode at batch 1 / 256 and prefill at 152 /
# 4,096 / 64 x 512 tokens unchanged and the split-invariance, prefix-cache and model GPU tests
# passing (session 64, calls 2 and 6). Each is set unless the user set it.
BLAS_DEFAULTS = {"CUBLAS_WORKSPACE_CONFIG": ":4096:2", "CUBLASLT_WORKSPACE_SIZE": "4096"}


def cuda_defaults(environ) -> dict[str, str]:
    """Set the served process's CUDA defaults in ``environ`` (``os.environ``, before anything
    touches CUDA): ``PYTORCH_CUDA_ALLOC_CONF`` = ALLOCATOR_DEFAULT unless the user set either of
    PyTorch's allocator variables (even to nothing: ``PYTORCH_CUDA_ALLOC_CONF=`` keeps
    PyTorch's own default), and each of BLAS_DEFAULTS the user did not set. Returns what it
    set."""
    wanted = dict(BLAS_DEFAULTS)
    if not any(v in environ for v in ALLOCATOR_VARIABLES):
        wanted = {ALLOCATOR_VARIABLES[0]: ALLOCATOR_DEFAULT, **wanted}
    done = {k: v for k, v in wanted.items() if k not in environ}
    environ.update(done)
    return done


class InvalidConfiguration(SystemExit):
    """Bad settings: ``str()`` is the message naming each variable; the exit status is 2, as
    for the server's other start-up errors (a SystemExit with a message exits 1: it did, a QA
    report, session 31). Python prints no message for a status: whoever lets it end the
    process prints it first (the import of ``settings`` below does)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.code = 2


def load_settings() -> Settings:
    """Read the settings; InvalidConfiguration names the variables with bad values."""
    from pydantic import ValidationError

    try:
        return Settings()
    except ValidationError as e:
        # a validator's own ValueError reads "Value error, <its text>": its text alone
        msgs = [err["msg"].removeprefix("Value error, ") for err in e.errors()]
        lines = [f"RWKV_{'_'.join(map(str, err['loc'])).upper()}: {msg}" if err["loc"]
                 else msg for err, msg in zip(e.errors(), msgs)]  # (no loc: a check of several)
        raise InvalidConfiguration("Invalid configuration:\n  " + "\n  ".join(lines)) from None


try:
    settings = load_settings()
except InvalidConfiguration as e:  # ends the importing process with status 2: said here
    print(e, file=sys.stderr)
    raise
