"""``min_p`` over HTTP (OpenAI routes and the Task API): at min_p 1 only the most likely token
(after penalties) can be drawn, so a hot sampled reply equals the greedy one; out-of-range
values are refused naming the field."""

import pytest

from openai_helpers import http, server  # noqa: F401 (fixtures)
from task_api_client import create, wait_result
from test_api_openai import assert_refused_on_both

PROMPT_IDS = [3, 1000, 2000, 33, 261]
CHAT = dict(model="rwkv-7", messages=[{"role": "user", "content": "Tell me a story."}],
            reasoning_effort="none", max_tokens=8)


def text(http, path, **body) -> str:
    r = http.post(path, json=body)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["message"]["content"] if "message" in choice else choice["text"]


def test_min_p_one_is_greedy_and_lower_values_sample(http):
    for path, body in (("/v1/completions", dict(prompt=PROMPT_IDS, max_tokens=8)),
                       ("/v1/chat/completions", CHAT)):
        greedy = text(http, path, **body, temperature=0)
        hot = dict(body, temperature=2.0, top_k=0, top_p=1.0)
        assert text(http, path, **hot, min_p=1.0, seed=5) == greedy
        assert text(http, path, **hot, min_p=1.0, seed=6) == greedy
        # without it the same hot requests wander off (the check above could not pass by luck)
        assert greedy not in (text(http, path, **hot, min_p=0.0, seed=5),
                              text(http, path, **hot, seed=6))


def test_task_api_min_p(http):
    greedy = dict(temperature=0, top_k=0, top_p=1, presence_penalty=0)
    hot = dict(temperature=2.0, top_k=0, top_p=1, presence_penalty=0, min_p=1.0, seed=3)
    want = wait_result(http, create(http, "/v1/tasks/tmp", max_tokens=10, **greedy)["task_id"])
    got = wait_result(http, create(http, "/v1/tasks/tmp", max_tokens=10, **hot)["task_id"])
    assert got["result"] == want["result"]
    r = http.post("/v1/tasks/tmp", json={"prompt": "hi", "min_p": 1.5})
    assert r.status_code == 422 and "min_p" in r.text


@pytest.mark.parametrize("value", [1.5, -0.1, "x"])
def test_openai_min_p_out_of_range_is_a_400(http, value):
    assert_refused_on_both(http, "min_p", value)


def test_a_server_default_min_p_applies_where_a_request_gives_none(tiny_model_path, tmp_path):
    """``RWKV_DEFAULT_MIN_P=1``: a hot request without min_p replies as greedy, on both APIs;
    one giving min_p 0 samples."""
    import httpx

    from server.config import Settings
    from openai_helpers import LiveServer

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu",
                        task_db_path=str(tmp_path / "t.db"), api_key=None, chat_think=False,
                        verbose=False, default_min_p=1.0)
    with LiveServer(settings) as srv, httpx.Client(base_url=srv.url, timeout=60) as c:
        body = dict(prompt=PROMPT_IDS, max_tokens=8, top_k=0, top_p=1.0)
        greedy = text(c, "/v1/completions", **body, temperature=0)
        assert text(c, "/v1/completions", **body, temperature=2.0, seed=5) == greedy
        assert text(c, "/v1/completions", **body, temperature=2.0, seed=5, min_p=0) != greedy
        hot = dict(temperature=2.0, top_k=0, top_p=1, presence_penalty=0, seed=3)
        want = wait_result(c, create(c, "/v1/tasks/tmp", max_tokens=10, temperature=0,
                                     top_k=0, top_p=1, presence_penalty=0)["task_id"])
        got = wait_result(c, create(c, "/v1/tasks/tmp", max_tokens=10, **hot)["task_id"])
        assert got["result"] == want["result"]
