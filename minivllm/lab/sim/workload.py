"""Seeded request workloads: arrival times and prompt / output lengths (§11.1, §11.7, §11.9).

Mirrors the request generator of vLLM's ``benchmarks/benchmark_serving.py`` (``--request-rate``,
gamma gaps for bursty traffic) and Vidur's synthetic generators (``poisson``, ``gamma`` with a CV,
``static``). Length parameters come from the Sarathi-Serve paper (arXiv:2403.02310, Table 2)
and the Azure LLM inference trace 2023 (github.com/Azure/AzurePublicDataset). Nothing is downloaded: a
workload is a function of its arguments.

* Lengths: each published distribution is a lognormal with mu = ln(median) and, where the mean is
  published, sigma = sqrt(2 ln(mean / median)), so both the mean and the median match; where only
  the median and P90 are (arxiv_summarization), sigma = ln(P90 / median) / z_0.9. Draws are rounded
  and clamped to >= 1; with ``max_model_len`` the output is clamped to leave room for the prompt and
  the prompt to [1, max_model_len - output].
* Arrivals: "poisson" = exponential gaps of mean 1 / rate; "bursty" = gamma gaps with the same mean
  and shape 1 / burstiness**2, so the gaps' coefficient of variation equals ``burstiness`` (vLLM's
  ``--burstiness`` is the gamma shape itself: its k is our 1 / sqrt(k)); "all_at_once" (or rate
  None / inf) = every request at t = 0. The first request arrives at t = 0.
* "rag_burst" (§11.1's scene): short chats (16-64 prompt tokens, 128-256 output) arrive first; once
  the last one has arrived, ``burst_delay`` (0.5 s) later, long prompts (2048-8192 tokens, 16-64 out)
  land among the decoding chats. ``num_chats`` defaults to half the requests (rounded up).
* Token ids are in [3, vocab_size); with ``shared_prefix_len`` every request of prefix group g
  (= index % num_prefix_groups) starts with the same "system prompt" tokens, so prefix caching hits.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from minivllm.metrics.stats import percentile
from minivllm.sampling_params import SamplingParams

ARRIVALS = ("poisson", "bursty", "all_at_once")
Z90 = NormalDist().inv_cdf(0.9)


@dataclass(frozen=True)
class LengthSpec:
    """One token-length distribution: "lognormal" (median, sigma), or "uniform" (low..high, ints)."""

    form: str
    median: float = 0.0
    sigma: float = 0.0
    low: int = 0
    high: int = 0

    @classmethod
    def from_mean_median(cls, mean: float, median: float) -> LengthSpec:
        return cls("lognormal", median=median, sigma=math.sqrt(2.0 * math.log(mean / median)))

    @classmethod
    def from_median_p90(cls, median: float, p90: float) -> LengthSpec:
        return cls("lognormal", median=median, sigma=math.log(p90 / median) / Z90)

    @classmethod
    def uniform(cls, low: int, high: int) -> LengthSpec:
        return cls("uniform", low=int(low), high=int(high))

    @property
    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2) if self.form == "lognormal" else (self.low + self.high) / 2

    def quantile(self, q: float) -> float:
        """The q-quantile (0..1) of the continuous distribution (before rounding)."""
        if self.form == "lognormal":
            return self.median * math.exp(self.sigma * NormalDist().inv_cdf(q))
        return self.low + q * (self.high - self.low)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.form == "lognormal":
            x = np.rint(rng.lognormal(math.log(self.median), self.sigma, n))
        else:
            x = rng.integers(self.low, self.high + 1, n)
        return np.maximum(x, 1).astype(np.int64)


@dataclass(frozen=True)
class LengthDistribution:
    """Prompt and output lengths of one workload kind; ``burst`` = rag_burst's long prompts."""

    prompt: LengthSpec
    output: LengthSpec
    source: str
    trace_rate: float | None = None  # the trace's mean arrival rate, req/s (for reference; not a default)
    burst: LengthDistribution | None = None


_mm = LengthSpec.from_mean_median
WORKLOAD_KINDS: dict[str, LengthDistribution] = {
    "azure_conv": LengthDistribution(
        _mm(1155, 1020), _mm(211, 129), "Azure LLM inference trace 2023, conversation", 5.53
    ),
    "azure_code": LengthDistribution(_mm(2048, 1469), _mm(27.9, 13), "Azure LLM inference trace 2023, code", 2.57),
    "sharegpt": LengthDistribution(
        _mm(2340, 1730), _mm(439, 415), "openchat_sharegpt4 trace of Sarathi-Serve, LLaMA2 tokenizer (§3.4)"
    ),
    "arxiv_summarization": LengthDistribution(
        LengthSpec.from_median_p90(7059, 12985),
        LengthSpec.from_median_p90(208, 371),
        "arxiv_summarization, Sarathi-Serve Table 2",
    ),
    "uniform": LengthDistribution(LengthSpec.uniform(32, 512), LengthSpec.uniform(16, 128), "synthetic"),
    "rag_burst": LengthDistribution(
        LengthSpec.uniform(16, 64),
        LengthSpec.uniform(128, 256),
        "§11.1: short chats decoding, then long prompts land among them",
        burst=LengthDistribution(LengthSpec.uniform(2048, 8192), LengthSpec.uniform(16, 64), "RAG prompts"),
    ),
    "short_decode": LengthDistribution(LengthSpec.uniform(8, 64), LengthSpec.uniform(64, 256), "decode-heavy chats"),
}
# prompt_len / output_len (any kind) and rag_burst's long_prompt_len / long_output_len: an int, a (low, high)
# pair (uniform) or a LengthSpec; rag_burst's num_chats (0..num_requests) and burst_delay (seconds >= 0).
OVERRIDES = ("prompt_len", "output_len", "num_chats", "long_prompt_len", "long_output_len", "burst_delay")


@dataclass
class WorkloadRequest:
    """One timed request, as ``LLMEngine.run`` reads it."""

    request_id: str
    arrival_time: float  # seconds from the start
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    priority: int = 0
    prefix_group: int | None = None

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def output_len(self) -> int:
        return self.sampling_params.max_tokens


def _params_for(output_len: int) -> SamplingParams:
    return SamplingParams(max_tokens=int(output_len), temperature=0.0, ignore_eos=True)


COLUMNS = ("request_id", "arrival_time", "prompt_len", "output_len", "priority", "prefix_group", "tokens")


@dataclass
class Workload:
    name: str
    seed: int
    requests: list[WorkloadRequest]
    params: dict[str, Any] = field(default_factory=dict)  # what generated it (JSON-safe)

    def save(self, path: str | Path) -> None:
        """Write ``.json`` (everything) or ``.csv`` (a ``# {name, seed, params}`` line, then one row per request)."""
        path, meta = Path(path), {"name": self.name, "seed": self.seed, "params": self.params}
        rows = [
            (r.request_id, r.arrival_time, r.prompt_len, r.output_len, r.priority, r.prefix_group, r.prompt_token_ids)
            for r in self.requests
        ]
        if path.suffix == ".json":
            path.write_text(json.dumps(dict(meta, requests=[dict(zip(COLUMNS, row)) for row in rows])))
        elif path.suffix == ".csv":
            with path.open("w", newline="") as f:
                f.write("# " + json.dumps(meta) + "\n")
                w = csv.writer(f)
                w.writerow(COLUMNS)
                for *head, group, tokens in rows:
                    w.writerow([*head, "" if group is None else group, " ".join(map(str, tokens))])
        else:
            raise ValueError(f"workload file must end in .json or .csv, got {path.name!r}.")

    @classmethod
    def load(cls, path: str | Path) -> Workload:
        path = Path(path)
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            rows = data["requests"]
        elif path.suffix == ".csv":
            with path.open(newline="") as f:
                data, rows = json.loads(f.readline()[2:]), list(csv.DictReader(f))
            for row in rows:
                row["tokens"] = [int(t) for t in row["tokens"].split()]
                row["prefix_group"] = int(row["prefix_group"]) if row["prefix_group"] else None
        else:
            raise ValueError(f"workload file must end in .json or .csv, got {path.name!r}.")
        requests = []
        for row in rows:
            if int(row["prompt_len"]) != len(row["tokens"]):
                raise ValueError(f"{path.name}: request {row['request_id']}: prompt_len != number of tokens.")
            params = _params_for(int(row["output_len"]))
            requests.append(
                WorkloadRequest(
                    row["request_id"],
                    float(row["arrival_time"]),
                    row["tokens"],
                    params,
                    int(row["priority"]),
                    row["prefix_group"],
                )
            )
        return cls(data["name"], data["seed"], requests, data["params"])

    def stats(self) -> dict[str, float]:
        """Mean / median / P90 of prompt and output lengths, time span and mean arrival rate."""
        out: dict[str, float] = {"num_requests": len(self.requests)}
        for name in ("prompt", "output"):
            xs = [getattr(r, f"{name}_len") for r in self.requests]
            out[f"{name}_mean"] = sum(xs) / len(xs) if xs else math.nan
            out[f"{name}_median"], out[f"{name}_p90"] = percentile(xs, 50), percentile(xs, 90)
        t = sorted(r.arrival_time for r in self.requests)
        out["duration"] = t[-1] - t[0] if t else 0.0
        out["mean_rate"] = (len(t) - 1) / out["duration"] if out["duration"] > 0 else math.inf
        return out


def _spec(value: Any, name: str) -> LengthSpec:
    if isinstance(value, LengthSpec):
        return value
    if isinstance(value, int) and value >= 1:
        return LengthSpec.uniform(value, value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and 1 <= value[0] <= value[1]:
        return LengthSpec.uniform(*value)
    raise ValueError(
        f"{name} must be an int >= 1, a (low, high) pair with 1 <= low <= high, or a LengthSpec; got {value!r}."
    )


def arrival_times(n: int, rate: float | None, arrival: str, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """n arrival times starting at 0 (see the module docstring for the processes)."""
    if arrival == "all_at_once" or rate is None or math.isinf(rate):
        return np.zeros(n)
    if arrival == "poisson":
        gaps = rng.exponential(1.0 / rate, n - 1)
    else:
        shape = 1.0 / burstiness**2
        gaps = rng.gamma(shape, 1.0 / (rate * shape), n - 1)
    return np.concatenate([[0.0], np.cumsum(gaps)])


def _check(args: dict[str, Any], overrides: dict[str, Any]) -> None:
    """ValueError naming the first bad argument and its allowed values."""
    kind, n, rate, burst, prefix, mml = (
        args[k] for k in ("kind", "num_requests", "rate", "burstiness", "shared_prefix_len", "max_model_len")
    )
    if kind not in WORKLOAD_KINDS:
        raise ValueError(f"unknown workload kind {kind!r}; allowed: {', '.join(WORKLOAD_KINDS)}.")
    is_int = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    checks = {
        "num_requests": (is_int(n) and n >= 1, "an int >= 1"),
        "arrival": (args["arrival"] in ARRIVALS, f"one of {', '.join(ARRIVALS)}"),
        "rate": (rate is None or rate > 0, "None (all at once) or > 0 requests/s (inf = all at once)"),
        "burstiness": (0 < burst < math.inf, "finite and > 0 (the CV of the gaps; 1 = Poisson)"),
        "seed": (is_int(args["seed"]) and args["seed"] >= 0, "an int >= 0"),
        "vocab_size": (is_int(args["vocab_size"]) and args["vocab_size"] > 3, "an int > 3"),
        "shared_prefix_len": (is_int(prefix) and prefix >= 0, "an int >= 0"),
        "num_prefix_groups": (is_int(args["num_prefix_groups"]) and args["num_prefix_groups"] >= 1, "an int >= 1"),
        "max_model_len": (
            mml is None or (is_int(mml) and mml >= prefix + 2),
            "None or an int >= shared_prefix_len + 2",
        ),
    }
    for name, (ok, allowed) in checks.items():
        if not ok:
            raise ValueError(f"{name} must be {allowed}; got {args[name]!r}.")
    for key in overrides:
        if key not in OVERRIDES or (key not in ("prompt_len", "output_len") and kind != "rag_burst"):
            names = OVERRIDES if kind == "rag_burst" else OVERRIDES[:2]
            raise ValueError(f"unknown override {key!r} for kind {kind!r}; allowed: {', '.join(names)}.")


def make_workload(
    kind: str,
    num_requests: int,
    *,
    rate: float | None = None,
    arrival: str = "poisson",
    seed: int = 0,
    vocab_size: int = 49152,
    max_model_len: int | None = None,
    burstiness: float = 1.0,
    shared_prefix_len: int = 0,
    num_prefix_groups: int = 1,
    **overrides: Any,
) -> Workload:
    """A seeded workload of ``num_requests`` requests of one of WORKLOAD_KINDS (see the module docstring)."""
    args = {k: v for k, v in locals().items() if k != "overrides"}  # the arguments, recorded in Workload.params
    _check(args, overrides)
    dist = WORKLOAD_KINDS[kind]
    rng_len, rng_arr, rng_tok = (np.random.default_rng([seed, stream]) for stream in range(3))
    groups = [(dist, "req", num_requests, 0.0)]
    if dist.burst is not None:
        num_chats = overrides.get("num_chats", (num_requests + 1) // 2)
        delay = overrides.get("burst_delay", 0.5)
        if not (isinstance(num_chats, int) and 0 <= num_chats <= num_requests):
            raise ValueError(f"num_chats must be an int in 0..num_requests ({num_requests}); got {num_chats!r}.")
        if not (isinstance(delay, (int, float)) and 0 <= delay < math.inf):
            raise ValueError(f"burst_delay must be >= 0 seconds; got {delay!r}.")
        groups = [(dist, "chat", num_chats, 0.0), (dist.burst, "long", num_requests - num_chats, float(delay))]
    prefixes = [rng_tok.integers(3, vocab_size, shared_prefix_len).tolist() for _ in range(num_prefix_groups)]
    requests: list[WorkloadRequest] = []
    for i, (d, id_prefix, n, t0) in enumerate(groups):
        if n == 0:
            continue
        tag = "long_" if i == 1 else ""
        p_spec = _spec(overrides.get(f"{tag}prompt_len", d.prompt), f"{tag}prompt_len")
        o_spec = _spec(overrides.get(f"{tag}output_len", d.output), f"{tag}output_len")
        outs, prompts = o_spec.sample(rng_len, n), p_spec.sample(rng_len, n)
        if max_model_len is not None:  # the prompt (with its shared prefix) plus the output fit max_model_len
            outs = np.minimum(outs, max_model_len - shared_prefix_len - 1)
            prompts = np.minimum(prompts, max_model_len - shared_prefix_len - outs)
        if i == 1:  # the long prompts land after every chat has arrived, while the chats decode
            t0 += max((r.arrival_time for r in requests), default=0.0)
        times = t0 + arrival_times(n, rate, arrival, burstiness, rng_arr)
        for j in range(n):
            g = len(requests) % num_prefix_groups if shared_prefix_len else None
            tokens = (prefixes[g] if g is not None else []) + rng_tok.integers(3, vocab_size, prompts[j]).tolist()
            params = _params_for(outs[j])
            requests.append(WorkloadRequest(f"{id_prefix}-{j}", float(times[j]), tokens, params, prefix_group=g))
    requests.sort(key=lambda r: r.arrival_time)
    args["overrides"] = {k: asdict(v) if isinstance(v, LengthSpec) else v for k, v in overrides.items()}
    return Workload(kind, seed, requests, json.loads(json.dumps(args)))
