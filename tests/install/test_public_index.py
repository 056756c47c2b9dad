"""The student set and the dev set resolve on the public package index alone, for every platform and Python the
README promises (tests/install/public_index.py does the work; it needs to reach https://pypi.org)."""

from __future__ import annotations

import pytest

from tests.install.public_index import PLATFORMS, PYTHONS, SETS, resolve_all, table


@pytest.mark.slow
def test_both_sets_resolve_on_the_public_index_everywhere():
    results = resolve_all()
    assert {(r.set_name, r.platform, r.python) for r in results} == {
        (s, p, v) for s in SETS for p in PLATFORMS for v in PYTHONS
    }
    failed = [f"{r.label}:\n{r.error}" for r in results if not r.ok]
    assert not failed, table(results) + "\n\n" + "\n\n".join(failed)
    for r in results:
        assert r.packages["torch"] == "2.13.0", r.label
        # the dev set brings the Triton of its interpreter tests; where PyPI's torch needs one, they agree
        if r.set_name == "dev" and r.platform == "linux-x86_64":
            assert r.packages["triton"] == "3.7.1", r.label
