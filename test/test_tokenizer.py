"""Tokenizer and vocabulary file: exact agreement with the `rwkv` package's TRIE_TOKENIZER."""

import random
import time
from pathlib import Path

import pytest

from server.model import build_vocab
from server.model.tokenizer import DEFAULT_VOCAB_PATH, IncrementalDecoder, Tokenizer

rwkv_tokenizer = pytest.importorskip("rwkv.rwkv_tokenizer")
REPO = Path(__file__).resolve().parents[1]
FEW_SHOT = REPO / "few_shot.txt"


@pytest.fixture(scope="module")
def tok():
    return Tokenizer()


@pytest.fixture(scope="module")
def ref():
    return rwkv_tokenizer.TRIE_TOKENIZER(str(build_vocab.package_vocab_path()))


def random_text(rng: random.Random, n: int) -> str:
    """Mixed text: ASCII words, CJK, emoji (ZWJ, skin tones), controls, newline runs, marks."""
    pieces = [
        lambda: " ".join(rng.choice(["User", "Assistant", "hello", "world", "the", "def", "x"])
                         for _ in range(rng.randint(1, 5))),
        lambda: "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(1, 12))),
        lambda: "".join(chr(rng.randint(0x1F300, 0x1FAFF)) for _ in range(rng.randint(1, 3))),
        lambda: "\U0001F468\u200D\U0001F469\u200D\U0001F467" + rng.choice(["", "\U0001F3FD"]),
        lambda: "".join(chr(rng.randint(0, 0x1F)) for _ in range(rng.randint(1, 4))),
        lambda: "\n" * rng.randint(1, 40) + " " * rng.randint(0, 20),
        lambda: chr(rng.randint(0x300, 0x36F)),  # lone combining mark
        lambda: rng.choice(["。", "，", "：", "Привет", "¿Qué?", "\u00a0", "\r\n", "\t", "\x7f"]),
        lambda: "".join(chr(rng.choice([rng.randint(0x80, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]))
                        for _ in range(rng.randint(1, 4))),
    ]
    out, length = [], 0
    while length < n:
        s = rng.choice(pieces)()
        out.append(s)
        length += len(s)
    return "".join(out)[:n]


def test_vocab_file_is_package_vocab_plus_eos(tmp_path):
    lines = DEFAULT_VOCAB_PATH.read_text(encoding="utf-8").split("\n")
    assert lines[0] == "0 '<|endoftext|>' 13"
    assert lines[-1] == "" and len(lines) - 1 == 65530
    assert [int(l.split(" ", 1)[0]) for l in lines[:-1]] == list(range(65530))
    rebuilt = build_vocab.build(tmp_path / "v.txt")
    assert rebuilt.read_bytes() == DEFAULT_VOCAB_PATH.read_bytes()
    pkg = build_vocab.package_vocab_path().read_bytes().replace(b"\r\n", b"\n")
    assert DEFAULT_VOCAB_PATH.read_bytes() == build_vocab.EOS_LINE.encode() + pkg


def test_ids_of_note(tok):
    assert tok.vocab_size == 65536
    assert tok.decode([0]) == "" and tok.decode_bytes([0]) == b""
    assert tok.encode("\n") == [11] and tok.encode("\n\n") == [261]
    assert tok.encode("User") == [24281] and tok.encode(":") == [59]
    assert tok.encode("User: hi\n\n")[:2] == [24281, 59]
    assert tok.decode([24281, 59, 261]) == "User:\n\n"
    assert 0 not in tok.encode("<|endoftext|>")  # the EOS id is never produced by text


@pytest.mark.skipif(not FEW_SHOT.exists(), reason="few_shot.txt not present")
def test_few_shot_agrees_with_rwkv(tok, ref):
    text = FEW_SHOT.read_text(encoding="utf-8")
    assert tok.encode(text) == ref.encode(text)
    assert tok.decode(tok.encode(text)) == text


def test_random_text_agrees_with_rwkv_and_round_trips(tok, ref):
    rng = random.Random(1234)
    for _ in range(300):
        s = random_text(rng, rng.randint(1, 200))
        ids = tok.encode(s)
        assert ids == ref.encode(s), repr(s)
        assert tok.decode(ids) == s
        assert ref.decode(ids) == s


def test_random_bytes_agree_with_rwkv(tok, ref):
    rng = random.Random(7)
    for _ in range(200):
        data = bytes(rng.choice([rng.randint(0, 255), 10, 32, 0xE4, 0x80])
                     for _ in range(rng.randint(1, 100)))
        ids = tok.encode_bytes(data)
        assert ids == ref.encodeBytes(data)
        assert tok.decode_bytes(ids) == data
        assert tok.decode(ids) == data.decode("utf-8", errors="replace")


def test_decode_never_raises(tok):
    assert tok.decode([129]) == "\ufffd"  # lone continuation byte 0x80
    assert tok.decode(tok.encode_bytes(b"\xe4\xbd")) == "\ufffd"  # ends inside a character
    assert tok.decode([tok.vocab_size, 65535, 70000, -1, 24281]) == "User"  # (the size: past)
    assert tok.encode("\ud800") == tok.encode_bytes(b"\xed\xa0\x80")  # lone surrogate: no raise


def test_validate(tok):
    assert tok.validate((0, 11, 65535)) == [0, 11, 65535]
    for bad in (65536, -1):
        with pytest.raises(ValueError, match=str(bad)):
            tok.validate([11, bad])


def test_incremental_matches_full_decode_token_by_token(tok):
    text = "你好，世界！😀👍🏽 User: 我们来谈谈 emoji 🧑‍🚀🇨🇳 和中文。\n\n" * 5
    ids = tok.encode(text)
    dec = IncrementalDecoder(tok)
    parts = [dec.feed([t]) for t in ids]
    assert "".join(parts) + dec.flush() == tok.decode(ids) == text
    assert not any("\ufffd" in p for p in parts)
    assert sum(p == "" for p in parts) > 0  # some tokens did end inside a character


def test_incremental_equals_full_decode_on_random_ids(tok):
    rng = random.Random(99)
    for _ in range(200):
        ids = [rng.choice([rng.randrange(65536), rng.randrange(129, 257)])
               for _ in range(rng.randint(1, 30))]
        dec, parts, i = IncrementalDecoder(tok), [], 0
        while i < len(ids):
            k = rng.randint(1, 4)
            parts.append(dec.feed(ids[i:i + k]))
            i += k
            held = dec.pending  # only a proper prefix of a character may be held
            assert len(held) <= 3 and (not held or 0xC2 <= held[0] <= 0xF4)
        assert "".join(parts) + dec.flush() == tok.decode(ids)
        assert dec.pending == b""


def test_incremental_releases_impossible_bytes(tok):
    dec = IncrementalDecoder(tok)
    assert dec.feed(tok.encode_bytes(b"\xe4\xbd")) == "" and dec.pending == b"\xe4\xbd"
    assert dec.feed(tok.encode_bytes(b"\xa0")) == "你"
    assert dec.feed(256) == "\ufffd"  # 0xFF can never start a character
    assert dec.feed(tok.encode_bytes(b"\xed\xa0")) == "\ufffd\ufffd"  # surrogate prefix
    assert dec.feed(tok.encode_bytes(b"\xf0\x9f")) == "" and dec.flush() == "\ufffd"
    assert dec.feed(0) == "" and dec.flush() == ""


def test_encode_100k_chars_benchmark(tok, ref):
    text = random_text(random.Random(5), 100_000)
    t0 = time.perf_counter()
    ids = tok.encode(text)
    elapsed = time.perf_counter() - t0
    print(f"\nencode 100k chars ({len(text.encode())} bytes, {len(ids)} tokens): {elapsed:.3f} s")
    assert ids == ref.encode(text)
    assert elapsed < 2.0  # loose regression guard; ~0.05 s measured on 2 cores


def test_reusing_encoder_is_exact_and_reuses():
    """ReusingEncoder (the loader's encode) gives Tokenizer.encode's ids for texts sharing
    prefixes of every length with earlier ones (cuts inside words and UTF-8 characters, texts
    shorter than the previous, unrelated texts), and resumes past the shared part when there
    is one."""
    import random

    from server.model.tokenizer import ReusingEncoder, Tokenizer

    tok = Tokenizer()
    enc = ReusingEncoder(tok, entries=4)
    starts = []
    real = tok.encode_bytes

    def spy(data, start=0):
        starts.append(start)
        return real(data, start)

    tok.encode_bytes = spy
    base = ("User: tell me about the weather in 北京 today, please.\n\nAssistant: It is sunny "
            "and warm — about 25 °C. 🙂\n\n") * 40
    rng = random.Random(0)
    pieces = ["User: hi", "\n\n", "Assistant:", "é", "你好", " ", "abc", "🙂", "\n"]
    for trial in range(200):
        cut = rng.randrange(0, len(base))
        text = base[:cut] + "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12)))
        if trial % 50 == 7:
            text = "".join(rng.choice(pieces) for _ in range(30))  # shares (almost) nothing
        assert enc.encode(text) == real(text.encode("utf-8")), (trial, cut)
    assert sum(s > 1000 for s in starts) > 100  # most texts resumed deep into the prefix
    assert enc.encode("") == []


def test_reusing_encoder_compares_only_what_can_share_more(monkeypatch):
    """A chat's next prompt extends the previous turn's text with its reply: that recent text
    is found with one prefix test, and the shorter recent texts (none of which can share more)
    are not compared byte by byte (each comparison cost ~20 us in a server). The ids stay
    Tokenizer.encode's."""
    from server.model import tokenizer as tk

    tok = tk.Tokenizer()
    enc = tk.ReusingEncoder(tok, entries=8)
    history = "System: be brief.\n\n" + "User: question about the weather. " * 30
    for i in range(6):  # shorter texts sharing parts of the history
        enc.encode(history[: 200 + 50 * i] + f" variant {i}")
    turn = history + "\n\nAssistant: sunny.\n\n"
    enc.encode(turn)
    compared = []
    real = tk.common_prefix_length
    monkeypatch.setattr(tk, "common_prefix_length",
                        lambda a, b: compared.append(len(b)) or real(a, b))
    text = turn + "User: and tomorrow?\n\nAssistant:"
    assert enc.encode(text) == tok.encode(text)
    assert compared == []
    other = "Completely different text. " * 20  # no prefix: compared with every recent
    assert enc.encode(other) == tok.encode(other)
    assert len(compared) == 8


def test_a_shown_lead_starts_the_text_only_when_completed(tok):
    """``IncrementalDecoder(lead, shown=True)`` (a Task API round after one that ended inside a
    character, shown then as U+FFFD): the character when the first bytes complete it, fed at
    once or byte by byte; else the lead is dropped (no second U+FFFD), also one that can never
    complete (a surrogate's ED A0); no tokens: ""."""
    one = {tok.token_bytes(i): i for i in range(1, 300) if len(tok.token_bytes(i)) == 1}
    zh, B = "中".encode(), tok.encode("B")

    def text(lead, ids, split=False):
        dec = IncrementalDecoder(tok, lead, shown=True)
        parts = [[i] for i in ids] if split else [ids]
        return "".join(dec.feed(p) for p in parts) + dec.flush()

    for split in (False, True):
        assert text(zh[:2], [one[zh[2:]]] + B, split) == "中B"
        assert text(zh[:1], [one[zh[1:2]], one[zh[2:]]] + B, split) == "中B"
        assert text(zh[:2], B, split) == "B"
        assert text(b"\xed\xa0", [one[b"\x80"]] + B, split) == "\ufffdB"  # (0x80: its own)
    assert text(zh[:2], []) == "" and text(zh[:1], [one[zh[1:2]]]) == "\ufffd"
    assert text(zh[:2], B) == text(b"", B)  # without a lead: as before
