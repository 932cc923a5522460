"""Pipeline schedules: the order in which each stage runs its forward / backward work.

Pure Python, no simpy: a schedule is a list of actions per stage; the step executor runs the lists
against the data dependencies, so bubbles emerge from the order and the dependencies, never from a
formula. Actions are ``(kind, micro_batch, chunk)`` with kind ``F`` (forward), ``B`` (backward;
the whole backward except under zb-h1, where it is the input-gradient half) and ``W``
(weight-gradient half, zb-h1 only).

Notes
-----
- gpipe: all forwards, then all backwards (Huang et al. 2019). Bubble (p-1)/m of the ideal time.
- 1f1b: min(p-i-1, m) warm-up forwards on stage i, then one-forward-one-backward, then the
  cool-down backwards (Narayanan et al. 2021 section 2.2.1, PipeDream-Flush). Bubble (p-1)/m.
- interleaved: Megatron-LM's ``forward_backward_pipelining_with_interleaving``: micro-batches
  in groups of N (``microbatch_group_size_per_vp_stage``, default p; the last group takes
  the remainder), each group running chunk 0 on all its micro-batches, then chunk 1, ...
  (``get_schedule_table``); virtual micro-batch k forward is the table's k-th (micro-batch,
  chunk), its backward the same micro-batch on chunk v - 1 - chunk; warm-up
  min(2 (p-i-1) + (v-1) N, m v). With N = p: chunk (k // p) % v on micro-batch
  (k // (p v)) p + k % p. Bubble (p-1)/(v m).
- zb-h1: 1F1B order with the backward split into B and W; stage i defers each W by i backward
  passes, so every stage holds p micro-batches like stage 0 of 1F1B (Qi et al. 2024, "Zero
  Bubble Pipeline Parallelism", section 2.1). Bubble (p-1)(F + B - W), DeepSeek-V3 Table 2's
  (p-1)(F + B_full - 2W).
"""

from __future__ import annotations

from workloads.layout import interleaved_warmup

Action = tuple[str, int, int]

def _one_f_one_b(p: int, i: int, m: int) -> list[Action]:
    warm = min(p - i - 1, m)
    out: list[Action] = [("F", j, 0) for j in range(warm)]
    for j in range(warm, m):
        out += [("F", j, 0), ("B", j - warm, 0)]
    out += [("B", j, 0) for j in range(m - warm, m)]
    return out


def schedule_table(m: int, v: int, group: int) -> list[tuple[int, int]]:
    """(micro-batch, chunk) of each virtual micro-batch: Megatron-Core's get_schedule_table."""
    table = []
    for first in range(0, m, group):
        last = m if first + group >= m else first + group
        table += [(j, c) for c in range(v) for j in range(first, last)]
        if last == m:
            break
    return table


def _interleaved(p: int, i: int, m: int, v: int, group: int | None = None) -> list[Action]:
    total = m * v
    table = schedule_table(m, v, group or p)

    def fwd(k: int) -> Action:
        return ("F", table[k][0], table[k][1])

    def bwd(k: int) -> Action:
        return ("B", table[k][0], v - 1 - table[k][1])

    warm = min(interleaved_warmup(p, i, v, group), total)
    out = [fwd(k) for k in range(warm)]
    for k in range(total - warm):
        out += [fwd(warm + k), bwd(k)]
    out += [bwd(k) for k in range(total - warm, total)]
    return out


def _zb_h1(p: int, i: int, m: int) -> list[Action]:
    out: list[Action] = []
    pending: list[int] = []
    for kind, j, c in _one_f_one_b(p, i, m):
        out.append((kind, j, c))
        if kind == "B":
            pending.append(j)
            if len(pending) > i:
                out.append(("W", pending.pop(0), 0))
    out += [("W", j, 0) for j in pending]
    return out


def stage_actions(schedule: str, p: int, stage: int, m: int, v: int = 1,
                  group: int | None = None) -> list[Action]:
    """The ordered actions of pipeline ``stage`` (0-based) for ``m`` micro-batches
    (``group``: the interleaved schedule's micro-batch group, default p)."""
    if schedule == "gpipe":
        return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)]
    if schedule == "1f1b":
        return _one_f_one_b(p, stage, m)
    if schedule == "interleaved":
        n = group or p
        if not p <= n <= m or 0 < m % n < p:
            raise ValueError(f"interleaved schedule: micro-batch group {n} needs pp ({p}) <= "
                             f"group <= micro-batches ({m}) and a last group of >= pp")
        return _interleaved(p, stage, m, v, group)
    if schedule == "zb-h1":
        return _zb_h1(p, stage, m)
    raise ValueError(f"unknown schedule {schedule!r}")


def upstream(kind: str, stage: int, chunk: int, p: int, v: int) -> tuple[int, int] | None:
    """(stage, chunk) whose output this action consumes from another pipeline rank, if any.

    Virtual stage order is chunk-major: chunk c of stage i is model piece c p + i.
    """
    if kind == "F":
        if stage > 0:
            return stage - 1, chunk
        return (p - 1, chunk - 1) if chunk > 0 else None
    if kind == "B":
        if stage < p - 1:
            return stage + 1, chunk
        return (0, chunk + 1) if chunk < v - 1 else None
    return None


def downstream(kind: str, stage: int, chunk: int, p: int, v: int) -> bool:
    """Whether this action's output feeds another virtual stage."""
    if kind == "F":
        return not (stage == p - 1 and chunk == v - 1)
    if kind == "B":
        return not (stage == 0 and chunk == 0)
    return False


def peak_in_flight(actions: list[Action]) -> int:
    """Most micro-batch chunks whose forward ran and whose backward has not finished."""
    live = peak = 0
    last_bwd = "W" if any(a[0] == "W" for a in actions) else "B"
    for kind, _, _ in actions:
        if kind == "F":
            live += 1
            peak = max(peak, live)
        elif kind == last_bwd:
            live -= 1
    return peak
