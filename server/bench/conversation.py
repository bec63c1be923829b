"""The growing chat of the prefix-cache benchmarks (``chat`` over HTTP, ``ttft`` in process):
a system prompt, then per turn one user message of filler text, so that the prompt of the last
of ``turns`` turns is about ``target`` tokens (system prompt + messages + ``reply_tokens``-token
replies). Pure Python: no web stack needed."""

from __future__ import annotations

FILLER = ("Here are more details about the situation, with numbers, names and places, so "
          "that you can answer precisely. ")


class Conversation:
    def __init__(self, tokenizer, turns: int, target: int, reply_tokens: int,
                 system: str = "You are a helpful assistant. "):
        self.per_turn = max(16, (target - 150) // turns - reply_tokens - 8)
        self.unit = len(tokenizer.encode(FILLER))
        self.messages = [{"role": "system", "content": system * 20}]

    def ask(self, turn: int) -> list[dict]:
        """Add the user message of ``turn`` (0-based); returns the messages to send."""
        self.messages.append({"role": "user", "content": f"Question {turn + 1}: "
                              + FILLER * max(1, self.per_turn // self.unit)
                              + "What do you conclude?"})
        return self.messages

    def reply(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})
