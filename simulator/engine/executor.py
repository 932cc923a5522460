"""The step executor: one simpy process per pipeline stage runs its schedule's actions.

An action waits for its input from the neighbouring (virtual) stage, runs for its compiled
duration, then hands its output over after the point-to-point transfer. With ``pp_overlap`` the
transfer runs on its own stream; without it the sender blocks for it. The data-parallel stream of
each stage reduces gradient buckets as the last backward of each chunk produces them
(``dp_overlap``) or all at the end. Bubbles are whatever idle time these dependencies leave.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import simpy

from simulator.engine.dataflow import KINDS, PipelineRun, dataflow_pipeline
from simulator.engine.schedules import downstream, stage_actions, upstream
from simulator.step.program import PARTS, Program

KIND_NAMES = {"F": "forward", "B": "backward", "W": "backward_weight"}
COMM_STREAMS = {"tp_comm": "tp", "cp_comm": "cp", "ep_comm": "ep", "zero_comm": "zero",
                "data_load": "data", "offload": "offload", "host": "host"}
"""Stream of each exposed communication part (PARTS[2:]) of a forward / backward action."""


@dataclass
class StepTrace:
    """Raw output of one simulated step (the Result builds its frames from it)."""

    rows: list[tuple]
    """(stage, chunk, micro_batch, stream, kind, start_s, end_s)."""
    stage_busy: np.ndarray
    """[stage, part]: seconds of each action part (PARTS order) on the compute stream."""
    pipeline_end: np.ndarray
    """[stage]: when the last action of the stage ended."""
    dp_end: np.ndarray
    """[stage]: when its gradient reductions (and embedding sync) ended."""
    step_time_s: float
    p2p_blocked: np.ndarray
    """[stage]: seconds the stage spent blocked in sends (pp_overlap off)."""
    critical: int = 0
    """Which program (0 = the representative, k = variants[k-1]) the trace follows."""

    def waited(self, wait_s: float) -> "StepTrace":
        """This step after every stage first waited ``wait_s`` for its data (loaders slower
        than the step: in a steady state the step lasts as long as they take). The wait is a
        ``data`` action of the first stage and counts as data_load on every stage."""
        rows = [(st, c, mb, stream, kind, t0 + wait_s, t1 + wait_s)
                for st, c, mb, stream, kind, t0, t1 in self.rows]
        if self.rows:
            rows.insert(0, (0, 0, 0, "data", "data_wait", 0.0, wait_s))
        busy = self.stage_busy.copy()
        busy[:, PARTS.index("data_load")] += wait_s
        return replace(self, rows=rows, stage_busy=busy, pipeline_end=self.pipeline_end + wait_s,
                       dp_end=self.dp_end + wait_s, step_time_s=self.step_time_s + wait_s)


def _run_pipeline(prog: Program) -> PipelineRun:
    """One pipeline on simpy, with its timeline rows."""
    env = simpy.Environment()
    p, v, m = prog.p, prog.v, prog.m
    dur = {k: prog.duration(k) for k in KINDS}
    parts = {"F": prog.F, "B": prog.B, "W": prog.W}
    arrived: dict[tuple, simpy.Event] = {}
    rows: list[tuple] = []
    record = rows.append
    busy = np.zeros((p, len(PARTS)))
    end = np.zeros(p)
    blocked = np.zeros(p)
    last_bwd: dict[tuple[int, int], tuple[float, float]] = {}
    bwd_spans: dict[tuple[int, int], list] = {(i, c): [] for i in range(p) for c in range(v)}
    bwd_kind = "W" if prog.schedule in ("zb-h1", "dualpipe") else "B"

    def signal(key):
        ev = arrived.get(key)
        if ev is None:
            ev = arrived[key] = env.event()
        return ev

    def deliver(key):
        signal(key).succeed()

    def send(kind: str, i: int, c: int, j: int):
        """Hand an action's output over (a process step: yields when sends block)."""
        key = (kind, i, c, j)
        if prog.p2p_s > 0:
            t0 = env.now
            if prog.p2p_blocking:
                yield env.timeout(prog.p2p_s)
                blocked[i] += prog.p2p_s
                deliver(key)
            else:
                env.timeout(prog.p2p_s).callbacks.append(lambda _e, key=key: deliver(key))
            record((i, c, j, "pp", "send_" + KIND_NAMES[kind], t0, t0 + prog.p2p_s))
        else:
            deliver(key)

    def stage(i: int):
        actions = stage_actions(prog.schedule, p, i, m, v, prog.group, prog.extra_warmup)
        held = None
        for k, (kind, j, c) in enumerate(actions):
            K = kind[0].upper()
            gates = [(K, upstream(K, i, c, p, v, prog.schedule), j)]
            if kind == "f":                 # a merged pair waits for both its inputs
                _, jb, cb = actions[k + 1]
                gates.append(("B", upstream("B", i, cb, p, v, prog.schedule), jb))
            for gk, up, gj in gates:
                if up is not None:
                    yield signal((gk, up[0], up[1], gj))
            start = env.now
            yield env.timeout(float(dur[K][i, c]))
            record((i, c, j, "compute", KIND_NAMES[K], start, env.now))
            here = [float(parts[K][n][i, c]) for n in PARTS]
            busy[i] += here
            # exposed communication of the action, each on its own stream, after its compute
            t = start + here[0] + here[1]
            for name, secs in zip(PARTS[2:], here[2:]):
                if secs > 0:
                    record((i, c, j, COMM_STREAMS[name], KIND_NAMES[K], t, t + secs))
                    t += secs
            if K == bwd_kind:
                last_bwd[(i, c)] = (start, env.now)
                bwd_spans[(i, c)].append((start, env.now))
            down = downstream(K, i, c, p, v, prog.schedule)
            if held is not None:            # the previous action's output, sent late
                yield from send(held[0], i, held[1], held[2])
                held = None
            if kind in ("f", "F>"):         # its output leaves after the next action
                held = (K, c, j) if down else None
            elif down:
                yield from send(K, i, c, j)
        end[i] = env.now

    procs = [env.process(stage(i)) for i in range(p)]
    env.run()
    stuck = [i for i, pr in enumerate(procs) if pr.is_alive]
    if stuck:
        raise RuntimeError(f"pipeline schedule {prog.schedule!r} deadlocks on stages {stuck}")
    return PipelineRun(rows, busy, end, blocked, last_bwd, bwd_spans)


def _zero_stream(prog: Program, pipes: list[PipelineRun], i: int, rows: list | None
                 ) -> float:
    """When stage ``i``'s ZeRO-2/3 reduce-scatters are done. Each layer's gradients are
    reduce-scattered once its backward (W where split) has produced them: a backward of n
    layers releases n equal shares of its chunk pass's reduce-scatter as it runs, each once
    that layer is done in every replica, onto the stage's gradient stream (first in, first
    out). From the closed form (no per-backward times): each chunk's last layer after its
    last backward, and no sooner than the stream's total work."""
    rs, n_layers = prog.zero_rs_s, prog.zero_rs_layers
    if rs is None or not rs[i].any():
        return 0.0
    v = prog.v
    if any(q.bwd_spans is None for q in pipes):
        tail = max(max(q.last_bwd[(i, c)][1] for q in pipes) + float(rs[i, c] / n_layers[i, c])
                   for c in range(v) if n_layers[i, c])
        return max(tail, prog.passes_per_chunk * float(rs[i].sum()))
    jobs = []
    for c in range(v):
        n = int(n_layers[i, c])
        frac = np.arange(1, n + 1) / n if n else np.zeros(0)
        for k in range(len(pipes[0].bwd_spans[(i, c)])):
            ready = np.max([q.bwd_spans[(i, c)][k][0] + frac * (q.bwd_spans[(i, c)][k][1] -
                                                                q.bwd_spans[(i, c)][k][0])
                            for q in pipes], axis=0)
            jobs += [(float(r), c) for r in ready]
    jobs.sort()
    t = 0.0
    for ready, c in jobs:
        start = max(t, ready)
        t = start + float(rs[i, c] / n_layers[i, c])
        if rows is not None:
            rows.append((i, c, -1, "zero", "grad_reduce_scatter", start, t))
    return t


def run_step(prog: Program, variants: tuple[Program, ...] = (), pipeline=None,
             timeline: bool = True) -> StepTrace:
    """One step of the representative pipeline ``prog`` and of any heterogeneous replicas
    (``variants``: same schedule, other durations, e.g. a straggler's). Collectives that span
    replicas (gradient buckets, the optimizer's global sync) wait for the slowest of them; the
    timeline and breakdown follow the critical (slowest) replica. ``pipeline`` replaces the
    simpy run of one pipeline (simulator.engine.analytic's closed form); ``timeline=False`` runs
    the pipeline as its dependency recurrence instead (simulator.engine.dataflow: the same
    numbers, bit for bit, without the event loop or the rows nobody will read)."""
    if pipeline is None:
        pipeline = _run_pipeline if timeline else dataflow_pipeline
    pipes = [pipeline(q) for q in (prog, *variants)]
    crit = max(range(len(pipes)), key=lambda k: (pipes[k].end.max(), -k))
    cp = pipes[crit]
    p, v = prog.p, prog.v
    rows = list(cp.rows)
    end = np.max([q.end for q in pipes], axis=0)

    def ready(i: int, c: int, n: int) -> np.ndarray:
        """When each of the n buckets of chunk c on stage i exists in every replica."""
        frac = np.arange(1, n + 1) / n
        return np.max([q.last_bwd[(i, c)][0] + frac * (q.last_bwd[(i, c)][1] -
                                                       q.last_bwd[(i, c)][0]) for q in pipes],
                      axis=0)

    dp_end = np.zeros(p)
    for i in range(p):
        t = 0.0 if prog.dp_overlap else end[i]
        # chunks finish their last backward in reverse chunk order; buckets go out in order:
        # bucket k starts at max(end of bucket k-1, ready_k), i.e. (max-plus, vectorised)
        # start_k = k d + max(t, cummax_j<=k (ready_j - j d))
        for c in sorted(range(v), key=lambda c: cp.last_bwd[(i, c)][1]):
            n = int(prog.dp_buckets[i, c])
            d = float(prog.dp_bucket_s[i, c])
            k = np.arange(n)
            if prog.dp_overlap:
                start = k * d + np.maximum(t, np.maximum.accumulate(ready(i, c, n) - k * d))
            else:
                start = t + k * d
            if timeline:
                rows.extend((i, c, -1, "dp", "grad_reduce", float(a), float(a) + d)
                            for a in start)
            t = float(start[-1]) + d
        if prog.embedding_sync_s[i] > 0:
            t0 = max(t, end[i])
            t = t0 + float(prog.embedding_sync_s[i])
            rows.append((i, -1, -1, "dp", "embedding_sync", t0, t))
        dp_end[i] = max(t, end[i], _zero_stream(prog, pipes, i, rows if timeline else None))
    # the optimizer needs every stage's gradients (grad-norm all-reduce over all ranks)
    sync = float(dp_end.max())
    step = 0.0
    for i in range(p):
        t0 = sync
        t1 = t0 + float(prog.optimizer_s[i])
        rows.append((i, -1, -1, "compute", "optimizer", t0, t1))
        if not prog.dp_overlap and prog.param_gather_s[i] > 0:
            rows.append((i, -1, -1, "dp", "param_gather", t1, t1 + prog.param_gather_s[i]))
            t1 += float(prog.param_gather_s[i])
        step = max(step, t1)
    return StepTrace(rows=rows, stage_busy=cp.busy, pipeline_end=end, dp_end=dp_end,
                     step_time_s=step, p2p_blocked=cp.blocked, critical=crit)
