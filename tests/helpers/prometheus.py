"""Read a Prometheus text page strictly: every family has HELP and TYPE, every sample sits in its family."""

from __future__ import annotations

import re

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_]\w*="(?:[^"\\]|\\.)*",?)*)\} (\S+)$')
LABEL = re.compile(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"')


def unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


def parse(text: str) -> dict[str, dict]:
    """A strict little parser of the text exposition format: families with HELP, TYPE and samples."""
    families: dict[str, dict] = {}
    current = None
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, help_text = line[7:].split(" ", 1)
            assert name not in families, f"family {name} twice"
            current = families[name] = {"help": help_text, "type": None, "samples": []}
        elif line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            assert name in families and families[name]["type"] is None and current is families[name]
            assert kind in ("gauge", "counter", "histogram")
            current["type"] = kind
        else:
            m = SAMPLE.match(line)
            assert m, f"bad sample line {line!r}"
            name, labels, value = m.groups()
            assert current is not None and current["type"] is not None
            family = next(f for f in families if name in (f, f"{f}_bucket", f"{f}_sum", f"{f}_count"))
            assert families[family] is current, f"{name} outside its family"
            parsed = {k: unescape(v) for k, v in LABEL.findall(labels)}
            current["samples"].append((name, parsed, float(value.replace("Inf", "inf"))))
    return families


def value(families, name, **labels) -> float:
    family = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
    hits = [v for n, lab, v in families[family]["samples"] if n == name and all(lab[k] == w for k, w in labels.items())]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]
