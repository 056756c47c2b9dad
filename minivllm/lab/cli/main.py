"""Command line: ``python -m minivllm COMMAND [flags]``; ``--help`` on any command lists its flags.

Each command lives in its own module with a ``main(argv)``; this file only dispatches.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "demo": ("minivllm.lab.cli.demo", "the real model: chats, then §11.1's scene with and without chunked prefill"),
    "steps": ("minivllm.lab.cli.steps", "the scheduler's step table for a small workload (no model)"),
    "bench": (
        "minivllm.lab.benchmarks.sweep",
        "offline benchmark and sweeps, real engine or simulator (vLLM flag names)",
    ),
    "serve": ("minivllm.serving.server", "OpenAI-compatible HTTP server with a live demo page"),
    "doctor": ("minivllm.lab.cli.doctor", "what is installed: torch build, device, model wheel, optional parts"),
}


def usage() -> str:
    lines = ["usage: python -m minivllm COMMAND [flags]", "", "commands:"]
    lines += [f"  {name:<7} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"{usage()}\n\nerror: unknown command {name!r}", file=sys.stderr)
        raise SystemExit(2)
    module_name = COMMANDS[name][0]
    if name == "bench" and rest[:1] == ["serve"]:  # python -m minivllm bench serve --base-url URL: the load client
        module_name, rest = "minivllm.lab.benchmarks.serve", rest[1:]
    module = importlib.import_module(module_name)
    module.main(rest)


if __name__ == "__main__":
    main()
