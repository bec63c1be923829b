"""Every Python SDK snippet of the product README (the seed), as written there, only the model
path changed (to a tiny random checkpoint) and prints turned into assertions."""

import pytest

from server import DynamicScheduler, RWKV070ModelLoader, SimpleScheduler
from server.task.task import Status


@pytest.fixture
def settings(tiny_model_path, tmp_path, monkeypatch):
    """``server.config.settings`` pointing at the tiny model and a fresh task database."""
    import server.task.manager as manager_module
    from server.config import settings

    monkeypatch.setattr(settings, "model_path", tiny_model_path)
    monkeypatch.setattr(settings, "task_db_path", str(tmp_path / "tasks.db"))
    monkeypatch.setattr(manager_module, "_manager", None)
    yield settings
    if manager_module._manager is not None:
        manager_module._manager.close()


def test_minimal_example(settings):
    loader = RWKV070ModelLoader(settings.model_path, settings.vocab_path)
    scheduler = DynamicScheduler(loader, max_batch_size=256, buffer_size=32)
    tasks = [
        scheduler.new_task(f"User: {prompt}\n\nAssistant:", max_tokens=20, temperature=0.7,
                           top_p=0.3, top_k=50)
        for prompt in ["你好，介绍一下你自己", "用 Python 写一个快速排序", "1+1等于几？"]
    ]
    scheduler.run()
    for task in tasks:
        text = f"[{task.task_id}] {task.decode(task.pop_tokens())[:200]}..."
        assert task.status == Status.FINISHED and len(text) > len("[TMP] ...")
    assert loader.decode(loader.encode("你好")) == "你好"
    state = loader.gen_state(batch_size=1)
    assert state.batch_size == 1 and float(state.wkv.abs().sum()) == 0.0


def test_callback_example(settings, tiny_loader):
    loader = tiny_loader
    scheduler = DynamicScheduler(loader, 8, 32)
    seen, done = [], []

    def on_tokens(tokens):
        seen.append(loader.decode(tokens))

    def on_finish(all_tokens):
        done.append(len(all_tokens))

    task = scheduler.new_task("User: 写一首关于春天的诗\n\nAssistant:", max_tokens=60,
                              temperature=0.8, collect_callback=on_tokens, finish_callback=on_finish)
    scheduler.run()
    assert done == [60] and len(seen) >= 2 and "".join(seen) == loader.decode(task.get_all_tokens())


def test_template_examples_with_task_manager(settings, tiny_loader):
    from server.task.manager import get_task_manager

    loader = tiny_loader
    scheduler = DynamicScheduler(loader, 256, 32)
    task_manager = get_task_manager()
    task_manager.set_dependencies(loader, scheduler.sampler)

    tpl = scheduler.new_task(
        "User: 你是一个资深 Python 后端工程师，请遵循 PEP8 规范。\n\nAssistant: 好的。\n\n",
        max_tokens=0, temperature=0.3)
    scheduler.run()
    task_manager.put_task("_coder", tpl)
    tasks = []
    for question in ["写一个线程安全的单例", "如何优化数据库连接池？", "解释 GIL 及其影响"]:
        new_id = task_manager.fork_template("_coder")
        task = task_manager.get_task(new_id)
        task.continue_gen()
        task.prefill(f"User: {question}\n\nAssistant:")
        task.max_tokens = 50
        scheduler.add_task(task)
        tasks.append(task)
    scheduler.run()
    assert all(t.status == Status.FINISHED and len(t.output) == 50 for t in tasks)

    # the daemon variant, continue_gen with text and max_tokens as keyword
    scheduler.start_daemon()
    try:
        template_task = scheduler.new_task(
            prompt="User: 你是一个专业的中英技术翻译，请翻译以下内容。\n\n", max_tokens=0,
            temperature=0.3)
        scheduler.run()
        task_manager.put_task("_tech_translator", template_task)
        new_id = task_manager.fork_template("_tech_translator")
        task = task_manager.get_task(new_id)
        task.continue_gen("请翻译：The transformer architecture revolutionized NLP.", max_tokens=40)
        scheduler.add_task(task)
        assert task.wait(30) and len(task.output) == 40
    finally:
        scheduler.shutdown()

    roles = {
        "_writer": "User: 你是一个创意故事作家。\n\nAssistant: 好的，让我们开始。\n\n",
        "_translator": "User: 你是一个专业的中英技术翻译。\n\nAssistant: 明白。\n\n",
    }
    for role_id, prompt in roles.items():
        task = scheduler.new_task(prompt=prompt, max_tokens=0)
        scheduler.run()
        task_manager.put_task(role_id, task)
    assert task_manager.get_task(task_manager.fork_template("_writer")).status == Status.READY


def test_fim_example(tiny_loader):
    loader = tiny_loader
    scheduler = SimpleScheduler(loader, 4, 16)
    prefix, suffix = "def hello_world():\n    print(", ")\n    return True"
    prompt = f"✿prefix✿✿suffix✿{suffix}✿middle✿{prefix}"
    task = scheduler.new_task(prompt, max_tokens=30, temperature=0.8)
    scheduler.run()
    assert len(task.get_all_tokens()) == 30
    assert isinstance(loader.decode(task.pop_tokens()), str)


def test_pop_tokens_clears_what_get_all_tokens_returns(tiny_loader):
    """The seed's table: ``pop_tokens`` takes the collected tokens and clears them,
    ``get_all_tokens`` takes them without clearing; after a pop it kept returning every token
    (session 28's QA). The round's whole output stays the API's (``round_tokens``) and the
    finish callback's."""
    finals = []
    scheduler = SimpleScheduler(tiny_loader, 4, 8)
    task = scheduler.new_task("User: hi\n\nAssistant:", max_tokens=12, temperature=0.8,
                              finish_callback=finals.append)
    scheduler.run()
    everything = task.get_all_tokens()
    assert len(everything) == 12 and task.get_all_tokens() == everything  # not cleared
    assert task.pop_tokens() == everything
    assert task.get_all_tokens() == [] and task.pop_tokens() == []
    assert task.round_tokens() == everything == finals[0]
    task.continue_gen(" more", max_tokens=5)
    scheduler.add_task(task)
    scheduler.run()
    assert len(task.get_all_tokens()) == 5 == len(task.round_tokens())


def test_translation_service_example(settings, tiny_loader):
    loader = tiny_loader
    scheduler = DynamicScheduler(loader, max_batch_size=64, buffer_size=32)

    def translate(texts: list[str], source_lang="中文", target_lang="英文"):
        tasks = [
            scheduler.new_task(f"User: 将以下{source_lang}翻译为{target_lang}：{t}\n\nAssistant:",
                               max_tokens=30, temperature=0.3, top_p=0.3)
            for t in texts
        ]
        scheduler.run()
        return [loader.decode(t.pop_tokens()) for t in tasks]

    results = translate(["你好世界", "机器学习很有趣", "今天天气真好"])
    assert len(results) == 3 and all(isinstance(r, str) and r for r in results)


def test_stored_template_in_a_new_process(settings, tiny_loader):
    """The template example run again later ("模板存储在 SQLite 中，重启服务后依然可用"): a new
    process forks the stored template and continues it with text, as the example does, without
    calling ``set_dependencies`` (the first template example never does)."""
    import server.task.manager as manager_module
    from server.task.manager import get_task_manager

    scheduler = DynamicScheduler(tiny_loader, 8, 32)
    template_task = scheduler.new_task(
        prompt="User: 你是一个专业的中英技术翻译，请翻译以下内容。\n\n", max_tokens=0, temperature=0.3)
    scheduler.run()
    get_task_manager().put_task("_tech_translator", template_task)
    get_task_manager().close()  # the process ends
    manager_module._manager = None

    task_manager = get_task_manager()  # the next run of the script
    new_id = task_manager.fork_template("_tech_translator")
    task = task_manager.get_task(new_id)
    task.continue_gen("请翻译：The transformer architecture revolutionized NLP.", max_tokens=12)
    scheduler.add_task(task)
    scheduler.run()
    assert task.status == Status.FINISHED and len(task.output) == 12
    assert task.decode(task.pop_tokens()) == tiny_loader.decode(task.output)


def test_readme_sdk_example_runs_again(settings, tiny_model_path):
    """README.md's Python SDK example, run twice on the same task database (a script run again
    later): the template it stores the first time is reused, not put again."""
    import re
    from pathlib import Path

    import server.task.manager as manager_module

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    code = re.search(r"## Python SDK \(no HTTP\)\n\n```python\n(.*?)```", readme, re.S).group(1)
    code = code.replace('"model.pth"', repr(tiny_model_path))
    code = re.sub(r"max_tokens( ?= ?)\d+", r"max_tokens\g<1>8", code)
    for run in range(2):
        ns: dict = {}
        exec(compile(code, "README.md", "exec"), ns)
        ns["scheduler"].shutdown()
        assert ns["task"].status == Status.FINISHED and len(ns["task"].output) == 8
        assert all(t.status == Status.FINISHED for t in ns["tasks"])
        manager_module._manager.close()  # the process ends
        manager_module._manager = None


def test_sdk_logs_progress_at_info_in_the_server_format(tiny_model_path, tmp_path):
    """A script using the SDK (no ``setup_logging``) logs INFO lines in the server's format, not
    loguru's default DEBUG line for every decode pulse."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = ("from server import DynamicScheduler, RWKV070ModelLoader\n"
              f"loader = RWKV070ModelLoader({tiny_model_path!r})\n"
              "s = DynamicScheduler(loader, max_batch_size=2, buffer_size=1)\n"
              "t = s.new_task('User: hi\\n\\nAssistant:', max_tokens=40, temperature=0)\n"
              "s.run()\nprint(len(t.output))\n")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "RWKV_TASK_DB_PATH": str(tmp_path / "t.db"),
           "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "40"
    lines = p.stderr.splitlines()
    assert not [ln for ln in lines if "DEBUG" in ln]  # 40 one-token pulses logged nothing each
    assert any("| INFO    |" in ln and "loaded rwkv7-tiny-random" in ln for ln in lines)


def test_a_stored_template_is_not_continued_in_place(settings, tiny_loader):
    """``get_task("_x")`` returns the stored template itself: continued (or prefilled) and run,
    it changed in memory while its row stayed as it was, so forks in this process started from
    another state than forks after a restart. It raises, naming the template; a fork works."""
    from server.task.manager import get_task_manager

    scheduler = DynamicScheduler(tiny_loader, 8, 32)
    task_manager = get_task_manager()
    tpl = scheduler.new_task("User: You are a poet.\n\nAssistant: OK.\n\n", max_tokens=0)
    scheduler.run()
    task_manager.put_task("_poet", tpl)
    history = list(tpl.history)
    same = task_manager.get_task("_poet")
    with pytest.raises(RuntimeError, match="_poet is a template"):
        same.continue_gen("User: more\n\nAssistant:", max_tokens=3)
    with pytest.raises(RuntimeError, match="_poet is a template"):
        same.prefill("User: more\n\nAssistant:")
    assert same.status == Status.FINISHED and same.history == history and not same.pending
    fork = task_manager.get_task(task_manager.fork_template("_poet"))
    fork.continue_gen("User: more\n\nAssistant:", max_tokens=3)
    scheduler.add_task(fork)
    scheduler.run()
    assert fork.finish_reason == "length" and fork.history[:len(history)] == history
    assert task_manager.get_task("_poet").history == history


def test_serving_on_the_cpu_never_imports_triton(tiny_model_path):
    """The CPU path is plain torch: a first request that asked whether a batched pass keeps its
    prompts' bits imported the Triton kernels there (~0.4 s inside the scheduler's step, holding
    the GIL: a fresh CPU server's first request waited for it)."""
    import subprocess
    import sys

    script = f"""
import sys
from server import DynamicScheduler, RWKV070ModelLoader
loader = RWKV070ModelLoader({tiny_model_path!r}, device="cpu")
from server.scheduler.prefix_cache import PrefixCache
scheduler = DynamicScheduler(loader, 4, 8, prefix_cache=PrefixCache(64 << 20, "cpu"))
assert scheduler.engine.model.prefill_align > 1  # split-invariant, as served
tasks = [scheduler.new_task("User: hi " * n + "\\n\\nAssistant:", max_tokens=3) for n in (5, 40, 90)]
for t in tasks:
    t.cache_origin = ""  # as the server's requests: the prefix cache's (a batched pass)
scheduler.run()
assert scheduler.prefiller.prefill_calls >= 1
assert all(len(t.pop_tokens()) == 3 for t in tasks)
print("triton" in sys.modules, "server.model.kernels" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"], out.stdout
