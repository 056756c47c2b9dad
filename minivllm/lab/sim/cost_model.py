"""Step-time cost model for the simulator and its presets (§11.7); fitting it is minivllm.lab.sim.fit.

Utilisation (the fraction of peak compute a step uses) is in :mod:`minivllm.lab.sim.utilisation`,
from the FLOP fields here (``peak_flops``, ``flops_per_token``, ``attn_flops_per_pair``).

One engine step is priced from its shape, a list of ``(query_len, context_len)``
per scheduled request (``context_len`` = tokens already in the KV cache), as a sum of named terms
(:meth:`CostModel.terms`; the simulator reports each term's share of the busy time):

    host      = host_step + per_request * R                       CPU work the GPU waits for
    linear    = overhead + per_token * max(T, ridge_tokens)         weights read / matmuls
                (or overhead + linear_profile(T): a measured table)
    attention = attn_floor + attn_pair * sum q*(k + (q+1)/2)       kernel floor per layer + prefill FLOPs
    kv_read   = kv_read_per_byte * kv_bytes_per_token * sum k      decode contexts, earlier chunks

``T`` = scheduled tokens, ``R`` = scheduled requests. How ``host`` meets the GPU terms is the preset's
``engine_generation`` (:mod:`minivllm.lab.sim.generation`): ``"v0.6-multistep"`` (the default) adds it, and its
``num_scheduler_steps`` charges it once per multi-step burst; ``"v1"`` overlaps it (a step costs
``max(host, device)``, the ``host`` term its exposed part). ``linear_profile`` (the GPU presets) is a measured
table of the linear layers' time by token count, read at the smallest profiled count >= T, so the steps
of tile / wave quantisation (SARATHI §4.4: a 264-token step costs ~26-36% more than a 256-token one on an
A100) are in it as measured (Vidur's lookup tables). Without it, the linear layers cost per token above
the ridge point and the weight read below it (a roofline); attention costs per causal (query, key)
pair (Vidur ``mfu_calculator.py``) plus the KV bytes it reads: decode contexts and the earlier chunks of
a chunked prompt (SARATHI §4.2). Mirrors, in one closed form, Vidur's
``vidur/execution_time_predictor/sklearn_execution_time_predictor.py`` (token-level ops priced by batch
tokens, decode attention by KV bytes, CPU overheads per step) and the profiling step of Sarathi-Serve
§4.3. KV capacity is ``kv_cache_bytes``, or, when ``memory`` is given, what vLLM's profiling run leaves
at the engine's budget (:mod:`minivllm.lab.sim.memory`). CPU jitter is not modelled.
"""

from __future__ import annotations

import bisect
import functools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from minivllm.core.output import SchedulerOutput
from minivllm.lab.sim.generation import DEFAULT_GENERATION, V06_MULTISTEP, check_generation, step_seconds
from minivllm.lab.sim.intake import intake_times
from minivllm.lab.sim.memory import MemoryModel

PRESET_DIR = Path(__file__).resolve().parent / "presets"  # package data (pyproject.toml)
COEFFICIENTS = ("overhead_s", "per_token_s", "per_request_s", "attn_pair_s", "kv_read_s_per_byte")
TERMS = ("host", "linear", "attention", "kv_read")  # CostModel.terms: where a step's time goes
PROFILE_GAP = 64  # a linear profile is read as steps where its counts are at most this far apart
StepShape = list[tuple[int, int]]  # (query_len, context_len) per scheduled request


def _count(row: list[float]) -> float:
    """A linear_profile row's token count (its sort key)."""
    return row[0]


def step_shape(out: SchedulerOutput) -> StepShape:
    """The shape of one step straight from the scheduler's decisions."""
    computed = out.num_computed_tokens
    return [(n, computed[r]) for r, n in out.num_scheduled_tokens.items()]


@dataclass
class CostModel:
    """Named coefficients in seconds, plus the model facts the simulator needs (KV size, vocab)."""

    name: str = "custom"
    overhead_s: float = 0.0  # per step: the linear layers' fixed part (CPU presets: everything fixed)
    per_token_s: float = 0.0  # linear layers per scheduled token, above the ridge point
    ridge_tokens: int = 0  # below this many tokens a step still pays for reading all weights
    per_request_s: float = 0.0  # per scheduled request: host work (inputs, sampling, outputs), per-request calls
    attn_pair_s: float = 0.0  # per causal (query, key) pair
    kv_read_s_per_byte: float = 0.0  # per byte of KV cache read (1 / effective bandwidth)
    kv_bytes_per_token: int = 0  # 2 (K, V) * layers * kv_heads * head_dim * bytes per element
    kv_cache_bytes: int = 0  # KV capacity: decides the number of blocks in the simulator
    peak_flops: float = 0.0  # the device's peak FLOP/s (dense bf16); 0: unknown (no utilisation)
    flops_per_token: float = 0.0  # linear-layer FLOPs per scheduled token, 2 x linear parameters
    attn_flops_per_pair: float = 0.0  # attention FLOPs per causal (query, key) pair, 4 x layers x d_model
    linear_profile: list[list[float]] = field(default_factory=list)  # [[tokens, seconds], ...] ascending
    attn_floor_s: float = 0.0  # per step: attention kernels' floor (one launch per layer, however small)
    host_step_s: float = 0.0  # per step: CPU time the GPU waits for (schedule, prepare inputs, launches)
    intake_per_request_s: float = 0.0  # API server: serial intake per request before the engine sees it
    engine_generation: str = DEFAULT_GENERATION  # "v0.6-multistep" (host + device) or "v1" (overlapped)
    num_scheduler_steps: int = 1  # v0.6-multistep: decode steps per scheduler call (--num-scheduler-steps)
    memory: dict[str, Any] = field(default_factory=dict)  # MemoryModel fields: KV capacity at the budget
    vocab_size: int = 49152
    max_model_len: int = 8192
    meta: dict[str, Any] = field(default_factory=dict)  # sources, derivation, calibration report

    def __post_init__(self) -> None:
        check_generation(self.engine_generation, self.num_scheduler_steps)

    def features(self, shape: StepShape) -> np.ndarray:
        """The factors the coefficients in COEFFICIENTS multiply, in that order."""
        tokens = sum(q for q, _ in shape)
        pairs = sum(q * k + q * (q + 1) / 2 for q, k in shape)
        kv_bytes = self.kv_bytes_per_token * sum(k for _, k in shape)
        return np.array([1.0, max(tokens, self.ridge_tokens), len(shape), pairs, kv_bytes], dtype=float)

    def terms(self, shape: Iterable[tuple[int, int]]) -> dict[str, float]:
        """Seconds of one step by term (TERMS); they sum to :meth:`step_time`."""
        return self.priced(shape)[1]

    def priced(self, shape: Iterable[tuple[int, int]], charge_host: bool = True) -> tuple[float, dict[str, float]]:
        """(:meth:`step_time`, :meth:`terms`) of one step, from one pass over its shape (the simulator's hot path).
        ``charge_host=False``: a step inside a multi-step burst, whose host work was paid by the burst's first."""
        shape = [(int(q), int(k)) for q, k in shape]
        if not shape:
            return 0.0, dict.fromkeys(TERMS, 0.0)
        x = self.features(shape)
        f = x * self.coefficients
        linear = self.profiled_linear(sum(q for q, _ in shape))
        terms = {
            "host": self.host_step_s + float(f[2]),
            "linear": float(f[0] + f[1]) + linear,
            "attention": self.attn_floor_s + float(f[3]),
            "kv_read": float(f[4]),
        }
        if self.engine_generation == V06_MULTISTEP and charge_host:  # serial: the sum, as it always was
            return float(x @ self.coefficients) + (self.host_step_s + self.attn_floor_s + linear), terms
        host = terms["host"] if charge_host else 0.0
        device = terms["linear"] + terms["attention"] + terms["kv_read"]
        t, terms["host"] = step_seconds(self.engine_generation, host, device)
        return t, terms

    @property
    def coefficients(self) -> np.ndarray:
        return np.array([getattr(self, c) for c in COEFFICIENTS], dtype=float)

    def step_time(self, shape: Iterable[tuple[int, int]]) -> float:
        """Seconds for one step; an empty step costs nothing (the engine runs no model)."""
        return self.priced(shape)[0]

    def profiled_linear(self, tokens: int) -> float:
        """``linear_profile`` at the smallest profiled token count >= tokens (a step, as the kernels' tiles are),
        linearly interpolated where the table skips more than PROFILE_GAP tokens; beyond the table, its last
        entry plus the slope over the table's upper half (compute bound there); 0 without a profile."""
        table = self.linear_profile
        if not table:
            return 0.0
        i = bisect.bisect_left(table, float(tokens), key=_count)  # float: the key's type (the same order)
        if i < len(table):
            if i == 0 or table[i][0] - table[i - 1][0] <= PROFILE_GAP:
                return float(table[i][1])
            (t0, s0), (t1, s1) = table[i - 1], table[i]
            return float(s0 + (s1 - s0) * (tokens - t0) / (t1 - t0))
        (t1, s1), (t0, s0) = table[-1], table[max(0, bisect.bisect_right(table, table[-1][0] / 2, key=_count) - 1)]
        return float(s1 + (s1 - s0) / (t1 - t0) * (tokens - t1)) if t1 > t0 else float(s1)

    def intake(self) -> Callable[[list[float]], list[float]] | None:
        """For ``run_workload(intake=...)``: when the engine sees each request (None: when it arrives)."""
        if self.intake_per_request_s <= 0:
            return None
        return functools.partial(intake_times, per_request_s=self.intake_per_request_s)

    def memory_model(self, gpu_memory_utilization: float | None = None) -> MemoryModel | None:
        """The GPU memory behind the KV capacity (None when the preset gives a fixed ``kv_cache_bytes``)."""
        if not self.memory:
            return None
        m = {**self.memory, "name": self.name, "kv_bytes_per_token": self.kv_bytes_per_token}
        if gpu_memory_utilization is not None:
            m["gpu_memory_utilization"] = gpu_memory_utilization
        return MemoryModel(**m)

    def num_blocks(
        self,
        block_size: int,
        max_num_batched_tokens: int | None = None,
        max_num_seqs: int | None = None,
        gpu_memory_utilization: float | None = None,
    ) -> int:
        """KV blocks: from ``memory`` at this budget (vLLM's profiling run) if given, else ``kv_cache_bytes``."""
        mem = self.memory_model(gpu_memory_utilization)
        if mem is not None and max_num_batched_tokens is not None and max_num_seqs is not None:
            return mem.num_blocks(max_num_batched_tokens, max_num_seqs, block_size)
        if self.kv_bytes_per_token <= 0 or self.kv_cache_bytes <= 0:
            raise ValueError(f"cost model {self.name!r} has no KV capacity (kv_cache_bytes, kv_bytes_per_token).")
        return int(self.kv_cache_bytes // (self.kv_bytes_per_token * block_size))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CostModel:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown cost-model fields {unknown}; allowed: {sorted(names)}.")
        return cls(**d)

    def save(self, path: str | Path) -> None:
        """JSON with one line per stored calibration sample (``meta["samples"]``), the rest indented."""
        d = self.to_dict()
        samples = d["meta"].pop("samples", None)
        text = json.dumps(d, indent=2)
        if samples is not None:
            rows = ",\n      ".join(json.dumps(s) for s in samples)
            head = text[: text.rindex("}", 0, text.rindex("}"))].rstrip()
            comma = "" if head.endswith("{") else ","
            text = f'{head}{comma}\n    "samples": [\n      {rows}\n    ]\n  }}\n}}'
        Path(path).write_text(text + "\n")

    @classmethod
    def from_preset(cls, name: str) -> CostModel:
        """A preset from minivllm/lab/sim/presets/NAME.json, or a path to such a JSON file."""
        path = Path(name) if name.endswith(".json") else PRESET_DIR / f"{name}.json"
        if not path.is_file():
            raise ValueError(f"unknown cost-model preset {name!r}; available: {', '.join(list_presets())}.")
        return cls.from_dict(json.loads(path.read_text()))


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


# ---------------------------------------------------------------------- shapes from a trace
@dataclass
class StepSample:
    """One measured step: its shape and how long it took."""

    shape: StepShape
    duration: float


def shapes_from_steps(steps: Sequence[Any]) -> list[StepShape]:
    """Rebuild each StepRecord's (query_len, context_len) pairs: a request's context starts at its
    prefix-cache hit when admitted (or resumed), grows by what it is scheduled, and is forgotten when
    it is preempted or finishes. Exact without speculative decoding (rejected drafts are not in a
    StepRecord)."""
    context: dict[str, int] = {}
    shapes = []
    for s in steps:
        for r in s.preempted:
            context.pop(r, None)
        for r in s.new_requests:
            context[r] = s.prefix_cache_hit_tokens.get(r, 0)
        scheduled: dict[str, int] = {}
        for part in (s.prefill_tokens, s.decode_tokens, s.spec_tokens):
            for r, n in part.items():
                scheduled[r] = scheduled.get(r, 0) + n
        shapes.append([(n, context.get(r, 0)) for r, n in scheduled.items()])
        for r, n in scheduled.items():
            context[r] = context.get(r, 0) + n
        for r in s.finished:
            context.pop(r, None)
    return shapes


def samples_from_steps(steps: Sequence[Any]) -> list[StepSample]:
    return [StepSample(shape, s.duration) for shape, s in zip(shapes_from_steps(steps), steps) if shape]
