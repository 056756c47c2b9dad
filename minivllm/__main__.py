"""``python -m minivllm COMMAND``: see :mod:`minivllm.cli.main`."""

from minivllm.cli.main import main

if __name__ == "__main__":
    main()
