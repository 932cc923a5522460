"""The executor's pipeline without the event loop, for steps nobody reads a timeline of.

The simpy processes of :func:`simulator.engine.executor._run_pipeline` realise a recurrence: an
action starts at ``max(stage free, its input's arrival)`` (simpy's ``env.now`` when the process
resumes), ends ``dur`` later, and its output arrives ``p2p_s`` after that (the sender waits for it
when sends block). This module evaluates that recurrence directly, stage by stage, waking a stage
when the input it waits for arrives: the same floating-point operations in the same order, so the
same numbers as the simpy run (tested exactly, tests/simulator/test_dataflow.py), at a fraction
of the cost (no event objects, no heap). Sweeps run it; ``simulate`` with a timeline runs simpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.engine.schedules import downstream, stage_actions, upstream
from simulator.step.program import PARTS, Program

KINDS = ("F", "B", "W")
"""Action kinds: forward, backward (input gradient under zb-h1), weight gradient."""


@dataclass
class PipelineRun:
    """One pipeline's outcome (the executor's simpy run, this module's recurrence, or the
    analytic closed form)."""
    rows: list[tuple]
    """Timeline rows (empty unless a timeline was asked for)."""
    busy: np.ndarray
    """[stage, part] seconds of each action part on the compute stream."""
    end: np.ndarray
    """[stage] when the stage's last action (and its blocking send) ended."""
    blocked: np.ndarray
    """[stage] seconds blocked in sends."""
    last_bwd: dict
    """(stage, chunk) -> (start, end) of its last backward (W under zb-h1)."""
    bwd_spans: dict | None = None
    """(stage, chunk) -> (start, end) of each of its backwards (W where split), in order;
    None from the closed form."""


def dataflow_pipeline(prog: Program) -> PipelineRun:
    """One pipeline of ``prog``, as the simpy run gives it, without timeline rows."""
    p, v, m = prog.p, prog.v, prog.m
    dur = {k: prog.duration(k).tolist() for k in KINDS}
    acts = [stage_actions(prog.schedule, p, i, m, v, prog.group, prog.extra_warmup)
            for i in range(p)]
    # each action's input key and whether it feeds another virtual stage, once per (kind, i, c)
    keys = [(k, i, c) for k in KINDS for i in range(p) for c in range(v)]
    up = {key: upstream(*key, p, v, prog.schedule) for key in keys}
    down = {key: downstream(*key, p, v, prog.schedule) for key in keys}
    x = float(prog.p2p_s)
    send, blocking = x > 0, prog.p2p_blocking
    bwd_kind = "W" if prog.schedule in ("zb-h1", "dualpipe") else "B"
    arrival: dict[tuple, float] = {}
    waiting: dict[tuple, int] = {}
    pos, now, blocked = [0] * p, [0.0] * p, [0.0] * p
    late: list[tuple | None] = [None] * p     # an output a stage sends after its next action
    last_bwd: dict[tuple[int, int], tuple[float, float]] = {}
    bwd_spans: dict[tuple[int, int], list] = {(i, c): [] for i in range(p) for c in range(v)}
    ready = list(range(p - 1, -1, -1))

    def emit(key: tuple, t: float, i: int) -> float:
        """Hand ``key``'s output over at ``t``; returns when the sender is free again."""
        arr = t
        if send:
            arr = t + x
            if blocking:
                t = arr
                blocked[i] += x
        arrival[key] = arr
        w = waiting.pop(key, None)
        if w is not None:
            ready.append(w)
        return t

    while ready:
        i = ready.pop()
        seq, k, t = acts[i], pos[i], now[i]
        n = len(seq)
        held = late[i]
        while k < n:
            kind, j, c = seq[k]
            K = kind[0].upper()
            gates = [(K, up[K, i, c], j)]
            if kind == "f":                 # a merged pair waits for both its inputs
                _, jb, cb = seq[k + 1]
                gates.append(("B", up["B", i, cb], jb))
            blocked_on = None
            for gk, src, gj in gates:
                if src is None:
                    continue
                a = arrival.get((gk, src[0], src[1], gj))
                if a is None:
                    blocked_on = (gk, src[0], src[1], gj)
                    break
                if a > t:
                    t = a
            if blocked_on is not None:
                waiting[blocked_on] = i
                break
            start = t
            t = start + dur[K][i][c]
            if K == bwd_kind:
                last_bwd[i, c] = (start, t)
                bwd_spans[i, c].append((start, t))
            if held is not None:            # the previous action's output, sent late
                t = emit(held, t, i)
                held = None
            if kind in ("f", "F>"):         # its output leaves after the next action
                held = (K, i, c, j) if down[K, i, c] else None
            elif down[K, i, c]:
                t = emit((K, i, c, j), t, i)
            k += 1
        pos[i], now[i], late[i] = k, t, held
    stuck = [i for i in range(p) if pos[i] < len(acts[i])]
    if stuck:
        raise RuntimeError(f"pipeline schedule {prog.schedule!r} deadlocks on stages {stuck}")
    return PipelineRun(rows=[], busy=_busy(prog, acts), end=np.array(now),
                     blocked=np.array(blocked), last_bwd=last_bwd, bwd_spans=bwd_spans)


def _busy(prog: Program, acts) -> np.ndarray:
    """[stage, part] seconds, summed action by action in schedule order (as the executor adds
    them: a sequential cumulative sum, not numpy's pairwise one)."""
    p, v = prog.p, prog.v
    vals = np.stack([np.stack([parts[name] for name in PARTS], axis=-1)    # [kind, stage,
                     for parts in (prog.F, prog.B, prog.W)])               # chunk, part]
    code = {k: n for n, k in enumerate(KINDS)}
    kc = np.array([[code[a[0][0].upper()] * v + a[2] for a in seq]
                   for seq in acts])                                     # [stage, action]
    flat = vals.transpose(1, 0, 2, 3).reshape(p, len(KINDS) * v, len(PARTS))
    per = np.take_along_axis(flat, kc[:, :, None], axis=1)                # [stage, action, part]
    return np.cumsum(per, axis=1)[:, -1, :]
