"""Guided choice: the output must be exactly one of a list of strings (§11.4.4).

Mirrors the role of ``vllm/v1/structured_output/`` (a grammar per request,
compiled by a background worker; the request waits in WAITING_FOR_FSM until it
is ready; a per-step mask of allowed tokens; the grammar advances as tokens are
accepted). The "grammar" here is a trie over the choices, walked with the
tokenizer's vocabulary: a token is allowed when the text generated so far plus
the token's text is still a prefix of some choice; EOS is allowed once the text
is a whole choice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol


@dataclass
class Vocabulary:
    """Token text -> token ids, built once per tokenizer (the slow part of compiling)."""

    ids_by_text: dict[str, list[int]]
    text_by_id: dict[int, str]
    max_len: int


class VocabTokenizer(Protocol):
    """What building a vocabulary asks of a tokenizer (a Hugging Face tokenizer has both)."""

    def __len__(self) -> int: ...

    def batch_decode(self, sequences: list[list[int]], /, *, clean_up_tokenization_spaces: bool) -> list[str]: ...


def build_vocabulary(tokenizer: VocabTokenizer) -> Vocabulary:
    """Decode every ordinary token on its own. Tokens that decode to a partial UTF-8 character
    ("\\ufffd") or to nothing cannot be placed in a string and are left out."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids = [i for i in range(len(tokenizer)) if i not in special]
    texts = tokenizer.batch_decode([[i] for i in ids], clean_up_tokenization_spaces=False)
    ids_by_text: dict[str, list[int]] = {}
    text_by_id: dict[int, str] = {}
    for i, text in zip(ids, texts):
        if text and "\ufffd" not in text:
            ids_by_text.setdefault(text, []).append(i)
            text_by_id[i] = text
    return Vocabulary(ids_by_text, text_by_id, max(map(len, ids_by_text), default=0))


class ChoiceGrammar:
    """One request's constraint. ``is_ready()`` / ``error`` are what the scheduler asks."""

    def __init__(self, choices: Sequence[str], eos_token_id: int | None, future: Future[Vocabulary]) -> None:
        self.choices = list(choices)
        self.eos_token_id = eos_token_id
        self._future = future
        self.error: str | None = None
        self.text = ""  # what has been generated so far
        self.finished = False

    def is_ready(self) -> bool:
        if not self._future.done():
            return False
        if self.error is None and self._future.exception() is not None:
            self.error = str(self._future.exception())
        return self.error is None

    @property
    def vocab(self) -> Vocabulary:
        return self._future.result()

    def allowed_token_ids(self) -> list[int]:
        """Tokens that keep the text a prefix of some choice (+ EOS when it is a whole choice)."""
        vocab = self.vocab
        allowed: set[int] = set()
        for choice in self.choices:
            if not choice.startswith(self.text):
                continue
            rest = choice[len(self.text) :]
            for end in range(1, min(len(rest), vocab.max_len) + 1):
                allowed.update(vocab.ids_by_text.get(rest[:end], ()))
            if not rest and self.eos_token_id is not None:
                allowed.add(self.eos_token_id)
        return sorted(allowed)

    def accept_token(self, token_id: int) -> None:
        if token_id == self.eos_token_id:
            self.finished = True
        else:
            self.text += self.vocab.text_by_id.get(token_id, "")


def check_choices(choices: Sequence[str], vocab: Vocabulary, eos_token_id: int | None) -> None:
    """Raise ValueError unless every choice can be spelled with the vocabulary and can end."""
    if eos_token_id is None:
        raise ValueError("guided_choice needs an EOS token to end the output, and this tokenizer has none.")
    if not choices:
        raise ValueError("guided_choice is empty: give at least one non-empty string.")
    for choice in choices:
        if not isinstance(choice, str) or not choice:
            raise ValueError(f"guided_choice entries must be non-empty strings, got {choice!r}.")
        reachable = [True] + [False] * len(choice)
        for i in range(len(choice)):
            if reachable[i]:
                for end in range(i + 1, min(len(choice), i + vocab.max_len) + 1):
                    if choice[i:end] in vocab.ids_by_text:
                        reachable[end] = True
        if not reachable[-1]:
            raise ValueError(f"guided_choice {choice!r} cannot be produced by the tokenizer's vocabulary.")


class GrammarCompiler:
    """A background worker that compiles grammars; the vocabulary is built once and shared."""

    def __init__(
        self,
        tokenizer: VocabTokenizer,
        eos_token_id: int | None,
        vocab_builder: Callable[[VocabTokenizer], Vocabulary] = build_vocabulary,
    ) -> None:
        self.tokenizer = tokenizer
        self.eos_token_id = eos_token_id
        self._vocab_builder = vocab_builder
        self._vocab: Vocabulary | None = None
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minivllm-grammar")

    def _compile(self, choices: list[str]) -> Vocabulary:
        with self._lock:
            if self._vocab is None:
                self._vocab = self._vocab_builder(self.tokenizer)
        check_choices(choices, self._vocab, self.eos_token_id)
        return self._vocab

    def submit(self, choices: Sequence[str]) -> ChoiceGrammar:
        choices = list(choices)
        return ChoiceGrammar(choices, self.eos_token_id, self._pool.submit(self._compile, choices))
