"""The caps flags of ``python -m minivllm serve`` and the checks of every server flag at start-up (§11.9).

vLLM's engine flags come from ``minivllm.engine.arg_utils`` (``vllm/engine/arg_utils.py``), the server's own
from ``server.build_parser``; the caps on one request (``request_caps``, not in vLLM) are added here. Every
server flag is checked before the model loads: a flag out of range stops the start with a message naming it
(``--max-request-body-bytes 0`` used to start and then answer every request, /health too, with a plain-text
500).
"""

from __future__ import annotations

import argparse
import dataclasses

from minivllm.serving.request_caps import (
    DEFAULT_MAX_STOP_STRING_LEN,
    DEFAULT_MAX_STOP_STRINGS,
    DEFAULT_MAX_STOP_TOKEN_IDS,
    DemoLimits,
    RequestCaps,
)


def add_request_cap_args(p: argparse.ArgumentParser) -> None:
    """The flags that bound one request's work (``request_caps``) and ``/demo/chats``."""
    caps = p.add_argument_group("bounds on one request (refused with a 400 naming the field, before any work)")
    caps.add_argument(
        "--max-stop-token-ids",
        type=int,
        default=DEFAULT_MAX_STOP_TOKEN_IDS,
        help="entries of stop_token_ids (default %(default)s)",
    )
    caps.add_argument(
        "--max-stop-strings",
        type=int,
        default=DEFAULT_MAX_STOP_STRINGS,
        help="stop strings per request (default %(default)s; OpenAI allows 4)",
    )
    caps.add_argument(
        "--max-stop-string-len",
        type=int,
        default=DEFAULT_MAX_STOP_STRING_LEN,
        help="characters of one stop string (default %(default)s)",
    )
    caps.add_argument(
        "--max-chat-messages",
        type=int,
        default=None,
        help="messages per chat (default: max_model_len / the chat template's tokens per message)",
    )
    caps.add_argument(
        "--max-prompt-chars",
        type=int,
        default=None,
        help="characters of a prompt or of a chat's messages (default: max_model_len x the "
        "longest token's characters, the most that can fit)",
    )
    caps.add_argument(
        "--demo-max-connections",
        type=int,
        default=DemoLimits.max_connections,
        help="/demo/chats streams open at once (default %(default)s; 0 switches /demo/chats off)",
    )
    caps.add_argument(
        "--demo-max-answers",
        type=int,
        default=DemoLimits.max_answers,
        help="answers per chat of one /demo/chats stream with repeat (default %(default)s)",
    )


FLAG_RANGES = {  # server flag -> (lowest, highest) allowed; None: no bound
    "port": (0, 65535),
    "max_trace_steps": (2, None),
    "max_request_body_bytes": (1, None),
    "max_stop_token_ids": (0, None),
    "max_stop_strings": (0, None),
    "max_stop_string_len": (1, None),
    "max_chat_messages": (1, None),
    "max_prompt_chars": (1, None),
    "demo_max_connections": (0, None),
    "demo_max_answers": (1, None),
}


def check_server_args(args: argparse.Namespace) -> None:
    """ValueError naming the first server flag out of its range (a 0 body limit used to start and then answer
    every request, /health too, with a plain-text 500)."""
    for name, (low, high) in FLAG_RANGES.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if value < low or (high is not None and value > high):
            allowed = f"in [{low}, {high}]" if high is not None else f"at least {low}"
            raise ValueError(f"--{name.replace('_', '-')} must be {allowed}, got {value}.")


def request_caps(args: argparse.Namespace) -> RequestCaps:
    caps = RequestCaps(args.max_stop_token_ids, args.max_stop_strings, args.max_stop_string_len)
    if args.max_chat_messages is not None:
        caps = dataclasses.replace(caps, max_chat_messages=args.max_chat_messages)
    return dataclasses.replace(caps, max_prompt_chars=args.max_prompt_chars)
