"""Command line: ``python -m minivllm {steps,demo}``."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minivllm", description="minivllm: chunked prefill, made visible")
    sub = parser.add_subparsers(dest="command", required=True)
    steps = sub.add_parser("steps", help="print the scheduler's step table for a small workload (no model)")
    steps.add_argument("--max-num-batched-tokens", type=int, default=64)
    steps.add_argument("--long-prefill-token-threshold", type=int, default=0)
    steps.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=True)
    steps.add_argument("--num-gpu-blocks", type=int, default=24)
    args = parser.parse_args(argv)

    if args.command == "steps":
        from minivllm.step_table import demo

        try:
            print(
                demo(
                    args.max_num_batched_tokens,
                    args.long_prefill_token_threshold,
                    args.enable_chunked_prefill,
                    args.num_gpu_blocks,
                )
            )
        except ValueError as e:
            parser.error(str(e))


if __name__ == "__main__":
    main()
