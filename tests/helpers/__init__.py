"""What the test modules share: builders, reference outputs, servers, parsers. No test module imports another
one (or a conftest); the scheduler's own test bench is in the package, ``minivllm.lab.testbench``.

Imported as ``tests.helpers.<module>``: pyproject's ``pythonpath = ["."]`` puts the repository root on
``sys.path`` (``tests`` itself is a namespace package, without an ``__init__.py``).
"""
