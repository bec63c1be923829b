"""Benchmark options a user can get wrong end in one line naming them (argparse's exit 2, or
a ``sys.exit`` message), not a traceback from deep inside torch or httpx."""

import argparse

import pytest
import torch

from server.bench import chat, common, decode


@pytest.mark.parametrize("value,words", [
    ("tpu", "is no device"), ("banana", "is no device"),
    ("cuda", "CUDA is not available"), ("cuda:7", "CUDA")])
def test_device_option_refuses_devices_this_machine_lacks(value, words):
    if value.startswith("cuda") and torch.cuda.is_available() and value == "cuda":
        pytest.skip("this machine has CUDA")
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        common.device_arg(value)
    assert common.device_arg("cpu") == "cpu"


def test_decode_bench_names_a_bad_device_in_one_line(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SystemExit) as e:
        decode.main(["--preset", "tiny", "--device", "cuda"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "argument --device: cuda: CUDA is not available here" in err
    assert "Traceback" not in err


def test_chat_bench_names_a_server_that_does_not_answer():
    with pytest.raises(SystemExit) as e:
        chat.main(["--url-on", "http://127.0.0.1:9", "--url-off", "http://127.0.0.1:9"])
    assert "--url-on http://127.0.0.1:9: no server answers there" in str(e.value.code)
