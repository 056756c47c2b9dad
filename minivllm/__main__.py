"""``python -m minivllm COMMAND``: see :mod:`minivllm.lab.cli.main`."""

from minivllm.lab.cli.main import main

if __name__ == "__main__":
    main()
