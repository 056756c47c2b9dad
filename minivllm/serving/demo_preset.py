"""``serve --demo-preset``: the live demo page's configuration in one flag (§11.1.1, §11.2, §11.7, §11.9).

The README's command, tests/serving/test_demo_scene.py and tests/serving/demo_screenshot.py all start the server
with it. Each value is a default only: a flag given on the command line wins (``--demo-preset
--max-num-batched-tokens 128``). Not in vLLM (its ``vllm serve`` has no presets).

* ``max_num_seqs`` 16: the engine refuses a token budget below ``max_num_seqs``, so the page can show budgets
  down to 16 (§11.7's 64, 32, 16); 16 also holds the six chats, the long prompt and a sizing prompt at once.
* ``max_num_batched_tokens`` 256 and ``long_prefill_token_threshold`` 128 (half the budget, what the page sets
  when chunking is switched on): the page's sizing prompts run in the chunks of the chunked run, and a chat
  that asks again during a long prefill gets in at once.
* ``max_model_len`` 4096 and 1024 KV blocks (16,384 tokens): room for the longest prompt the page sizes
  beside six chats' answers, so that no request is preempted during the scene.
"""

from __future__ import annotations

import argparse

DEMO_PRESET: dict[str, int] = {
    "max_num_seqs": 16,
    "max_num_batched_tokens": 256,
    "long_prefill_token_threshold": 128,
    "max_model_len": 4096,
    "num_gpu_blocks": 1024,
}
DEMO_PRESET_HELP = (
    "the live demo's settings ("
    + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in DEMO_PRESET.items())
    + "); flags given as well win"
)


def parse_with_preset(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; with ``--demo-preset``, DEMO_PRESET's values are the defaults of the flags not given."""
    known, _ = parser.parse_known_args(argv)
    if getattr(known, "demo_preset", False):
        parser.set_defaults(**DEMO_PRESET)
    return parser.parse_args(argv)
