"""Result of one simulated step: the numbers of the JSON contract and the timeline frames.

Metrics (each defined once here):

- ``step_time_s``: from the first forward to the end of the slowest stage's optimizer step.
- ``mfu``: model FLOPs (no recomputation, Megatron's count) / (step_time_s x gpus x dense peak).
- ``hfu``: the same with hardware FLOPs (recomputed forward work added).
- ``model_tflops_per_gpu`` / ``hardware_tflops_per_gpu``: the numerators per GPU per second / 1e12.
- ``tokens_per_s``: global_batch x seq_len / step_time_s.
- ``bubble_fraction``: idle time of the critical stage's pipeline / its busy time (Narayanan et
  al. 2021's bubble time fraction, (p-1)/(v m) for a uniform, communication-free pipeline).
- ``breakdown_s``: the critical stage's time by cause; parts add up to ``step_time_s``.
  Communication appears only where it was exposed (serialized with compute or waited for).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

TIMELINE_COLUMNS = ["stage", "chunk", "micro_batch", "stream", "kind", "start_s", "end_s"]
"""``Result.timeline``: one row per action; chunk / micro_batch are -1 where not applicable;
streams: compute (forward, backward, backward_weight, optimizer); tp, cp, ep, zero, data (the
exposed collectives of that forward / backward, after its compute); offload (the wait for CPU
activation offloading's copies); host (the wait for the CPU to issue a dropless MoE layer's
kernels, simulator.step.host); pp (send_*); dp (grad_reduce, embedding_sync, param_gather).
Times in seconds from the start of the step."""

LINK_COLUMNS = ["link", "tier", "bytes", "busy_s", "utilisation", "max_flows", "collective"]
"""``Result.links`` (fidelity flow): one row per directed fabric link that carried traffic in the
step, hottest first: tier (nvlink, gpu-nic, nic-leaf, leaf-spine (leaf-aggregation),
spine-core),
bytes carried, seconds busy, utilisation = bytes / (capacity x step_time_s), most concurrent
flows, and the collective that put the most bytes on it ("all_reduce dp stage 3")."""
CONGESTION_LINK_COLUMNS = ["max_queue_bytes", "mean_queue_bytes", "pause_s", "ecn_mark_rate",
                           "dropped_bytes"]
"""More ``Result.links`` columns, from the DCQCN / PFC fluid model (``congestion_control:
dcqcn``; NaN under the ideal max-min model): largest egress backlog, backlog averaged over the
step, seconds the link's sender was paused by PFC, fraction of its bytes ECN-marked, bytes
dropped (``pfc: false``)."""
QUEUE_COLUMNS = ["t_s", "link", "queue_bytes", "collective"]
"""``Result.queues`` (fluid model only): queue depth every 100 us
(:data:`simulator.congestion.shapes.FORM_QUEUE_SAMPLE_S`) on the hottest links of each
fabric collective batch, at the first time that batch runs in the step (later runs repeat it);
exported as Chrome-trace counters."""
COLLECTIVE_COLUMNS = ["kind", "group", "stage", "bytes", "calls_per_step", "time_s",
                      "busbw_gbyte_per_s", "flows", "start_s", "end_s", "nonblocking_s",
                      "slowdown", "hottest_link", "pause_s"]
"""``Result.collectives`` (fidelity flow): one row per fabric collective batch (all replicas of a
group role at a stage at once): kind, group role (tp, cp, ep, dp, edp, zdp/zedp for ZeRO's
per-micro-batch traffic, pp, emb; with HSDP dps/edps, dpr/edpr and zdps/zedps for the shard
and replica groups, workloads.ranks), bytes per group, how often it runs per step, its time and
nccl-tests busbw, flows in the batch, and the first start / last end of that stream in the
timeline; ``nonblocking_s``: the same collective under NCCL's cost model on a fabric that never
contends (the screening fidelity's time), ``slowdown`` = time_s / nonblocking_s (what ECMP
collisions, oversubscription, failures and congestion control cost it); ``hottest_link``: where
it queued deepest (fluid model), else where most of its flows met at once; ``pause_s``: PFC pause
seconds it caused per step, summed over links (NaN without the fluid model)."""

BREAKDOWN_KEYS = ("forward_compute", "backward_compute", "recompute", "tp_comm", "cp_comm",
                  "ep_comm", "zero_comm", "data_load", "offload", "host", "pp_comm", "bubble",
                  "dp_comm", "optimizer", "param_gather")


@dataclass
class Result:
    name: str
    step_time_s: float
    mfu: float
    hfu: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    tokens_per_s: float
    bubble_fraction: float
    breakdown_s: dict[str, float]
    memory_gib_per_gpu: float
    fits_memory: bool
    gpus: int
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vpp: int
    """Model chunks per pipeline rank (virtual stages when interleaved; 2 under DualPipe, its
    two pieces)."""
    micro_batch: int
    num_micro_batches: int
    schedule: str
    recompute: str
    seed: int
    fidelity: str
    """analytic, screening, flow (max-min on the fabric) or fluid (the flow fidelity through the
    DCQCN / PFC fluid model): how the number was made."""
    calibration: str
    sim_wall_s: float
    auto_choices: dict[str, int] = field(default_factory=dict)
    moe_routing: dict[str, float] = field(default_factory=dict)
    """MoE models: ``busiest_rank_load`` (pairs the busiest expert-parallel rank computes and
    receives / its balanced share, the pace of every MoE layer), ``busiest_expert_load``
    (DeepSeek's MaxVio + 1), ``dropped_fraction`` (pairs over capacity) and
    ``worst_rank_load`` (the most any rank receives in any routing drawn: the headroom a
    sync-free ``workload.moe.rank_capacity_factor`` needs); empty for dense models
    (:mod:`workloads.routing`)."""
    warnings: list[str] = field(default_factory=list)
    """Fields the scenario sets that have no effect at the fidelity it ran at."""
    timeline: pd.DataFrame = field(default=None, repr=False)
    links: pd.DataFrame = field(default=None, repr=False)
    collectives: pd.DataFrame = field(default=None, repr=False)
    queues: pd.DataFrame = field(default=None, repr=False)

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items()
             if k not in ("timeline", "links", "collectives", "queues")}
        d["breakdown_s"] = {k: float(v) for k, v in self.breakdown_s.items()}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def plot_timeline(self, **kw):
        """Gantt chart of the step (:func:`simulator.plots.timeline`)."""
        from simulator.plots import timeline
        return timeline(self.timeline, title=kw.pop("title", f"{self.name}: one step"), **kw)

    def plot_breakdown(self):
        """Where the step goes (:func:`simulator.plots.breakdown`)."""
        from simulator.plots import breakdown
        return breakdown(pd.DataFrame([self.breakdown_s], index=[self.name]))

    def to_chrome_trace(self, path: str | Path) -> None:
        """Write the timeline as Chrome trace JSON (opens in Perfetto / chrome://tracing):
        one process per pipeline stage, one thread per stream, and (fluid model) a queue-depth
        counter per hot link."""
        Path(path).write_text(json.dumps(chrome_trace(self.timeline, self.queues)))


STREAM_IDS = {"compute": 0, "tp": 1, "cp": 2, "ep": 3, "zero": 4, "data": 5, "pp": 6, "dp": 7,
              "offload": 8, "host": 9}


QUEUE_PID = 10_000
"""Chrome-trace process that holds the queue-depth counters (after the stage processes)."""


def chrome_trace(timeline: pd.DataFrame, queues: pd.DataFrame | None = None) -> dict:
    events = []
    for stage in sorted(timeline.stage.unique()):
        events.append({"ph": "M", "name": "process_name", "pid": int(stage),
                       "args": {"name": f"stage {stage}"}})
        for stream, tid in STREAM_IDS.items():
            events.append({"ph": "M", "name": "thread_name", "pid": int(stage), "tid": tid,
                           "args": {"name": stream}})
    for r in timeline.itertuples(index=False):
        name = r.kind if r.micro_batch < 0 else f"{r.kind} mb{r.micro_batch} c{r.chunk}"
        events.append({"ph": "X", "name": name, "cat": r.stream, "pid": int(r.stage),
                       "tid": STREAM_IDS[r.stream], "ts": r.start_s * 1e6,
                       "dur": (r.end_s - r.start_s) * 1e6,
                       "args": {"micro_batch": int(r.micro_batch), "chunk": int(r.chunk)}})
    if queues is not None and len(queues):
        events.append({"ph": "M", "name": "process_name", "pid": QUEUE_PID,
                       "args": {"name": "fabric queues"}})
        for r in queues.itertuples(index=False):
            events.append({"ph": "C", "name": f"queue {r.link}", "pid": QUEUE_PID,
                           "ts": r.t_s * 1e6, "args": {"KB": r.queue_bytes / 1e3}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
