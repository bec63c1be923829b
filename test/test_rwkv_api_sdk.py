"""The Task API through the ``rwkv-api`` SDK (PyPI ``rwkv-api``, API.md's named Task API client).

The SDK's sync ``Client`` and its ``AsyncClient`` against a real server (the session's tiny
one): every Task API call it makes, as it makes them (its own request bodies: ``"stream":
false`` in fork and continue bodies, ``{}`` bodies on ``stop``, ``delete`` and the stream's GET,
``force=false`` as a query string), its pydantic models parsing our replies, and its exception
classes mapping our error statuses. Greedy outputs are compared across the routes that must
agree (tmp and create, fork and continue, a template's fork and the task's own, a stream and
the stored result).
"""

from __future__ import annotations

import asyncio

import pytest

rwkv_api = pytest.importorskip("rwkv_api")
from rwkv_api import AsyncClient, Client  # noqa: E402
from rwkv_api.exceptions import RWKVError, RWKVValidationError, TaskNotFoundError  # noqa: E402
from rwkv_api.models import Status  # noqa: E402

PROMPT = "User: Name three rivers.\n\nAssistant:"
GREEDY = dict(temperature=0, max_tokens=12)
WAIT = dict(poll_interval=0.02, timeout=30)


@pytest.fixture
def client(server_url):
    with Client(server_url, timeout=30) as c:
        yield c


def _done(task):
    """The SDK's own wait (polls get_result until ``finished``)."""
    task.wait(**WAIT)
    assert task.finished and task.status == Status.FINISHED
    return task


def test_create_tmp_fim_and_their_results(client):
    kept = _done(client.create(PROMPT, persistent=True, **GREEDY))
    tmp = _done(client.create(PROMPT, **GREEDY))
    assert kept.task_id.startswith("TASK_") and tmp.task_id.startswith("TMP_")
    assert kept.result and tmp.result == kept.result
    assert kept.gen_time > 0 and kept.speed > 0
    assert client.get_task_status(kept.task_id).generated_buf == GREEDY["max_tokens"]
    assert kept.task_id in client.list_tasks()["cpu_tasks"]
    fim = _done(client.fim("def add(a, b):\n", "\n    return c\n", **GREEDY))
    assert fim.task_id.startswith("TMP_") and fim.result


def test_streams_give_the_stored_text(client):
    streamed = "".join(client.create(PROMPT, stream=True, persistent=True, **GREEDY))
    assert streamed == _done(client.create(PROMPT, **GREEDY)).result
    kept = _done(client.create(PROMPT, persistent=True, **GREEDY))
    assert "".join(kept.stream()) == kept.result  # a finished task's stream: GET with a {} body
    assert "".join(client.fim_stream("x = ", "", **GREEDY))


def test_fork_continue_and_templates_agree(client):
    a = _done(client.create(PROMPT, persistent=True, **GREEDY))
    b = _done(client.create(PROMPT, persistent=True, **GREEDY))
    more = dict(prompt="\n\nUser: And one more?\n\nAssistant:", max_tokens=10)
    forked = _done(a.fork(**more))
    assert forked.task_id.startswith("TASK_") and forked.task_id != a.task_id
    continued = _done(b.continue_(**more))
    assert continued.task_id == b.task_id
    assert forked.result and forked.result == continued.result
    tpl = a.as_template()
    assert tpl.task_id.startswith("_TMPL_") and tpl.finished
    assert _done(tpl.fork(**more)).result == forked.result
    with pytest.raises(RWKVError) as refused:  # a template needs force
        tpl.delete()
    assert refused.value.status_code == 403
    tpl.delete(force=True)
    with pytest.raises(TaskNotFoundError):
        client.get_task_result(tpl.task_id)


def test_stop_and_delete(client):
    task = client.create(PROMPT, persistent=True, temperature=1.0, max_tokens=40000)
    task.stop()
    _done(task)
    assert client.get_task_status(task.task_id).generated_buf < 40000
    task.delete()
    with pytest.raises(TaskNotFoundError):
        client.get_task_status(task.task_id)
    assert task.task_id not in client.list_tasks()["cpu_tasks"]


def test_errors_map_to_the_sdks_exceptions(client):
    with pytest.raises(RWKVValidationError):  # the SDK sends it unchecked: our 422
        client.create(PROMPT, temperature=5)
    with pytest.raises(TaskNotFoundError):
        client.fork_task("TASK_" + "0" * 32, prompt="x")
    with pytest.raises(TaskNotFoundError):
        list(client.stream_task("TASK_" + "0" * 32))


def test_async_client(server_url):
    async def run():
        async with AsyncClient(server_url, timeout=30) as c:
            task = await c.create(PROMPT, persistent=True, **GREEDY)
            await task.wait(**WAIT)
            assert task.finished and (await task.async_status()).status == Status.FINISHED
            streamed = "".join([x async for x in c.create_stream(PROMPT, **GREEDY)])
            again = "".join([x async for x in task.stream()])
            tail = "".join([x async for x in c.stream_task(task.task_id, pos=4)])
            return task.result, streamed, again, tail

    result, streamed, again, tail = asyncio.run(run())
    assert result and streamed == result and again == result
    assert tail and result.endswith(tail) and len(tail) < len(result)
