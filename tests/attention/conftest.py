"""Fixtures for the attention tests: the random paged batches of tests/helpers/attention.py."""

from __future__ import annotations

import pytest

from tests.helpers.attention import make_case, mixed_requests


@pytest.fixture
def case_factory():
    return make_case


@pytest.fixture
def mixed_factory():
    return mixed_requests
