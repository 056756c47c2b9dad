"""Pure figure builders: an EngineTrace (or a block-pool snapshot) in, a plotly Figure out.

Each builder lives in a small module named after what it draws; this module gathers them.
They never run the engine and never mutate the trace, so pytest checks their data directly.

========================  =====================================================  =========
builder                   what it shows                                          section
========================  =====================================================  =========
latency_gantt             per request: queued, prefill chunks, decode, preempted  §11.1.3
gantt_compare             two runs (chunked / unchunked) side by side            §11.1.3
chunk_schedule            per step: budget filled by decode / drafts / chunks    §11.3
kv_block_map(_at)         one cell per KV block: free / cached / in use          §11.5
recovery_timeline         tokens dropped by preemption, back from cache / redone §11.5
chunk_size_curves         TTFT, TPOT, throughput, utilisation vs chunk size      §11.7
latency_cdfs              TTFT and TPOT CDFs                                     §11.7
queue_kv_over_time        running / waiting queues and KV usage over time        §11.9
goodput_curve             goodput under a TPOT SLO vs chunk size                 §11.7
memory_curves             KV blocks, throughput, preemptions vs budget (memory)  §11.7
========================  =====================================================  =========
"""

from minivllm.lab.viz.figures.blocks import block_map_data, kv_block_map, kv_block_map_at
from minivllm.lab.viz.figures.curves import chunk_size_curves, latency_cdfs, queue_kv_over_time, sweep_points
from minivllm.lab.viz.figures.gantt import gantt_compare, latency_gantt
from minivllm.lab.viz.figures.recovery import recovery_timeline
from minivllm.lab.viz.figures.schedule import chunk_schedule, schedule_columns, step_view
from minivllm.lab.viz.figures.timeline import recovery_events, request_segments
from minivllm.lab.viz.figures.tuning import goodput_curve, memory_curves

__all__ = [
    "block_map_data",
    "chunk_schedule",
    "chunk_size_curves",
    "gantt_compare",
    "goodput_curve",
    "kv_block_map",
    "kv_block_map_at",
    "latency_cdfs",
    "latency_gantt",
    "memory_curves",
    "queue_kv_over_time",
    "recovery_events",
    "recovery_timeline",
    "request_segments",
    "schedule_columns",
    "step_view",
    "sweep_points",
]
