"""Pipeline schedules: the order in which each stage runs its forward / backward work.

Pure Python, no simpy: a schedule is a list of actions per stage; the step executor runs the lists
against the data dependencies, so bubbles emerge from the order and the dependencies, never from a
formula. Actions are ``(kind, micro_batch, chunk)`` with kind ``F`` (forward), ``B`` (backward;
the whole backward except under zb-h1 and dualpipe, where it is the input-gradient half) and
``W`` (weight-gradient half, zb-h1 and dualpipe). DualPipe's merged forward-backward pairs
are ``f`` then ``b``: the pair starts once both inputs have arrived and hands both outputs
over when it ends; a kind ending in ``>`` hands its output over after the next action, as
DualPipe's ranks send some forwards late.

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
- dualpipe: DeepSeek-V3's bidirectional pipeline (arXiv 2412.19437 section 3.2.1; the order
  of deepseek-ai/DualPipe's ``DualPipe.step``, eight steps per rank). Rank i holds two model
  pieces: chunk 0 is piece i of the micro-batches fed at rank 0, chunk 1 piece p-1-i of those
  fed at rank p-1 (half of the m each). Backwards split into B (input gradient) and W
  (weight gradient) where DualPipe defers W (zero bubble); elsewhere W follows its B at once.
  The main steps' forward-backward pairs start once both inputs are in and send both outputs
  when both are done; their compute runs back to back (DualPipe overlaps each one's
  all-to-all with the other's compute: the program hides that communication,
  :func:`dualpipe_pairs`). Needs p even and m even, m >= 2p. Bubble at most the paper's
  (p/2 - 1)(F&B + B - 3W) (Table 2; less here, where a send does not wait for its receiver
  to post the matching receive as DualPipe's batched isend / irecv does).
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


def _interleaved(p: int, i: int, m: int, v: int, group: int | None = None, extra: int = 0
                 ) -> list[Action]:
    total = m * v
    table = schedule_table(m, v, group or p)

    def fwd(k: int) -> Action:
        return ("F", table[k][0], table[k][1])

    def bwd(k: int) -> Action:
        return ("B", table[k][0], v - 1 - table[k][1])

    warm = min(interleaved_warmup(p, i, v, group) + extra, total)
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


def _dualpipe(p: int, i: int, m: int) -> tuple[list[Action], int]:
    """(actions, forward-backward pairs) of rank ``i``: DualPipe.step's eight steps. Phases
    in the steps are relative (0 = the direction fed at this half's end rank); chunks here are
    absolute (0 = fed at rank 0)."""
    half, hr, second = p // 2, min(i, p - 1 - i), int(i >= p // 2)
    middle = hr == half - 1
    acts: list[Action] = []
    nf, nb, deferred = [0, 0], [0, 0], []
    pairs = 0

    def f(rel: int, hold: bool = False) -> None:
        c = rel ^ second
        acts.append(("F>" if hold else "F", nf[c], c))
        nf[c] += 1

    def b(rel: int, zb: bool = False) -> None:
        c = rel ^ second
        acts.append(("B", nb[c], c))
        (deferred.append if zb else acts.append)(("W", nb[c], c))
        nb[c] += 1

    def w() -> None:
        acts.append(deferred.pop(0))

    def fb(r0: int, r1: int) -> None:
        """A merged pair: "f" waits for both inputs, its output leaves with its "b"'s."""
        nonlocal pairs
        c0, c1 = r0 ^ second, r1 ^ second
        acts.extend([("f", nf[c0], c0), ("b", nb[c1], c1), ("W", nb[c1], c1)])
        nf[c0] += 1
        nb[c1] += 1
        pairs += 1

    for _ in range((half - hr - 1) * 2):                    # 1: nF0
        f(0)
    for k in range(hr + 1):                                 # 2: nF0F1
        f(0, hold=not middle)       # DualPipe sends it after the F1 that follows
        f(1, hold=middle and k == hr)
    for _ in range(half - hr - 1):                          # 3: nB1W1F1
        b(1, zb=True)
        w()
        f(1)
    for k in range(m // 2 - p + hr + 1):                    # 4: nF0B1F1B0
        if k == 0 and middle:       # not overlapped; F0 leaves after B1
            f(0, hold=True)
            b(1)
        else:
            fb(0, 1)
        fb(1, 0)
    for _ in range(half - hr - 1):                          # 5: nB1F1B0
        b(1)
        fb(1, 0)
    step_6 = hr + 1                                         # 6: nB1B0
    zb = False
    for k in range(step_6):
        if k == step_6 // 2 and hr % 2 == 1:
            zb = True
        b(1, zb)
        if k == step_6 // 2 and hr % 2 == 0:
            zb = True
        b(0, zb)
    for _ in range(half - hr - 1):                          # 7: nWB0
        w()
        b(0, zb=True)
    while deferred:                                         # 8: nW
        w()
    return acts, pairs


def dualpipe_pairs(p: int, i: int, m: int) -> int:
    """Forward-backward pairs DualPipe overlaps on rank ``i`` (its main steps 4 and 5)."""
    return _dualpipe(p, i, m)[1]


def stage_actions(schedule: str, p: int, stage: int, m: int, v: int = 1,
                  group: int | None = None, extra_warmup: int = 0) -> list[Action]:
    """The ordered actions of pipeline ``stage`` (0-based) for ``m`` micro-batches
    (``group``: the interleaved schedule's micro-batch group, default p; ``extra_warmup``:
    forwards its warm-up runs beyond Megatron-LM's count, one under EP overlap)."""
    if schedule == "gpipe":
        return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)]
    if schedule == "1f1b":
        return _one_f_one_b(p, stage, m)
    if schedule == "interleaved":
        n = group or p
        if not p <= n <= m or 0 < m % n < p:
            raise ValueError(f"interleaved schedule: micro-batch group {n} needs pp ({p}) <= "
                             f"group <= micro-batches ({m}) and a last group of >= pp")
        return _interleaved(p, stage, m, v, group, extra_warmup)
    if schedule == "zb-h1":
        return _zb_h1(p, stage, m)
    if schedule == "dualpipe":
        if p % 2 or m % 2 or m < 2 * p:
            raise ValueError(f"dualpipe needs an even pp ({p}) and an even number of "
                             f"micro-batches ({m}) of at least 2 pp")
        return _dualpipe(p, stage, m)[0]
    raise ValueError(f"unknown schedule {schedule!r}")


def upstream(kind: str, stage: int, chunk: int, p: int, v: int, schedule: str = ""
             ) -> tuple[int, int] | None:
    """(stage, chunk) whose output this action consumes from another pipeline rank, if any.

    Virtual stage order is chunk-major: chunk c of stage i is model piece c p + i. DualPipe's
    chunk 1 runs the other way: its forward comes from stage i + 1, its backward from i - 1.
    """
    if schedule == "dualpipe" and kind in ("F", "B"):
        step = -1 if (kind == "F") == (chunk == 0) else 1
        src = stage + step
        return (src, chunk) if 0 <= src < p else None
    if kind == "F":
        if stage > 0:
            return stage - 1, chunk
        return (p - 1, chunk - 1) if chunk > 0 else None
    if kind == "B":
        if stage < p - 1:
            return stage + 1, chunk
        return (0, chunk + 1) if chunk < v - 1 else None
    return None


def downstream(kind: str, stage: int, chunk: int, p: int, v: int, schedule: str = "") -> bool:
    """Whether this action's output feeds another virtual stage."""
    if schedule == "dualpipe" and kind in ("F", "B"):
        step = 1 if (kind == "F") == (chunk == 0) else -1
        return 0 <= stage + step < p
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
        kind = kind[0].upper()
        if kind == "F":
            live += 1
            peak = max(peak, live)
        elif kind == last_bwd:
            live -= 1
    return peak
