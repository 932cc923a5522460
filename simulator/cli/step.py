"""`clustersim memory`, `simulate` and `topology`: one scenario's accounting, step and fabric."""

from __future__ import annotations

import json

import numpy as np
from rich.console import Console
from rich.table import Table

from simulator.cli.first_run import say_if_first_fluid_run
from simulator.config.scenario import Scenario
from simulator.errors import ScenarioError
from simulator.network.build import build_fabric_for
from simulator.simulate import simulate
from simulator.step.accounting import account


def _layout_lines(x, auto: dict, how: str) -> list[str]:
    """The layout line (from a Layout or a Result: same field names) and the auto choices."""
    recompute = x.recompute
    k = getattr(x, "recompute_num_layers", 1)       # a Layout says how (a Result does not)
    if recompute == "full" and (getattr(x, "recompute_method", "uniform") == "block" or k > 1):
        recompute += f" ({x.recompute_method} {k})"
    offload = getattr(x, "cpu_offload_layers", 0)
    lines = [f"  layout    tp {x.tp}  pp {x.pp}  dp {x.dp}  cp {x.cp}  ep {x.ep}  vpp {x.vpp}  "
             f"micro_batch {x.micro_batch}  micro-batches {x.num_micro_batches}  "
             f"schedule {x.schedule}  recompute {recompute}"
             + (f"  offload {offload} layers" if offload else "")]
    if auto:
        picked = ", ".join(f"{k} {v}" for k, v in auto.items())
        lines.append(f"  auto      {picked} ({how})")
    return lines


def _gib(x: float) -> str:
    return f"{x / 2**30:,.2f}"


def memory(args, out: Console) -> int:
    acc = account(Scenario.load(args.scenario, args.overrides))
    if args.json:
        print(json.dumps(acc.to_dict()))
        return 0
    d = acc.to_dict()
    lay = acc.layout
    out.print(f"[bold]{d['name']}[/]: {d['model']} on {lay.gpus:,} x {d['gpu']}")
    for line in _layout_lines(lay, acc.auto_choices, "least memory; `simulate` picks the fastest"):
        out.print(line)
    active = f" ({d['active_params'] / 1e9:,.1f}B active)" \
        if acc.params.active != acc.params.total else ""
    out.print(f"  params    {d['params'] / 1e9:,.1f}B{active}")
    out.print(f"  FLOPs     model {acc.flops.model:.4g} / hardware {acc.flops.hardware:.4g} "
              "per step")
    mem = acc.memory
    rows = list(range(len(mem)))
    if len(rows) > 8:
        rows = sorted({0, 1, acc.worst_stage, len(mem) - 2, len(mem) - 1})
    t = Table(title="Memory per GPU (GiB)")
    cols = ["stage", "layers", "weights", "grads", "optimizer", "activations", "io act.",
            "recompute", "zero3", "reserve", "total"]
    for c in cols:
        t.add_column(c, justify="right")
    for i in rows:
        r = mem.iloc[i]
        vals = [r.weights_bytes, r.grads_bytes, r.optimizer_bytes, r.activations_bytes,
                r.io_activations_bytes, r.recompute_working_bytes, r.zero3_gather_bytes,
                r.reserve_bytes, r.total_bytes]
        t.add_row(str(int(r.stage)), str(int(r.layers)), *(_gib(v) for v in vals),
                  style="bold" if i == acc.worst_stage else None)
    out.print(t)
    verdict = "[green]fits[/]" if acc.fits_memory else "[red]does not fit[/]"
    out.print(f"  peak {acc.memory_gib_per_gpu:,.2f} GiB of {d['hbm_gib']:g} GiB HBM on stage "
              f"{acc.worst_stage}: {verdict}")
    if lay.cpu_offload_layers:
        out.print(f"  host      {d['host_offload_gib']:,.2f} GiB per GPU of activations offloaded "
                  f"(the first {lay.cpu_offload_layers} layers)")
    return 0


LONG_STEP_ACTIONS = 200_000
"""Pipeline actions (micro-batch chunks x stages x forward/backward) above which ``simulate``
says first that the step will take a while (about 20 us each on the simpy executor)."""


def _warn_if_long(sc: Scenario) -> None:
    if sc.fidelity == "analytic":
        return
    lay = account(sc).layout
    kinds = 3 if lay.schedule in ("zb-h1", "dualpipe") else 2
    actions = lay.pieces * lay.num_micro_batches * kinds
    if actions > LONG_STEP_ACTIONS:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"simulating {actions:,} pipeline actions ({lay.num_micro_batches:,} micro-batches "
            f"x {lay.pieces} virtual stages): this takes a while; --set "
            f"fidelity=analytic runs the same pipeline in closed form")


def _say_if_compiling(sc: Scenario) -> None:
    """The first run of a checkout through the congestion model (flow fidelity with DCQCN or
    PFC) compiles its numba kernel, which takes longer than the step: say so first."""
    net = sc.network
    if sc.fidelity == "flow" and (net.congestion_control == "dcqcn" or net.pfc):
        say_if_first_fluid_run()


def simulate_cmd(args, out: Console) -> int:
    sc = Scenario.load(args.scenario, args.overrides)
    _warn_if_long(sc)
    _say_if_compiling(sc)
    res = simulate(sc)
    if args.trace:
        try:
            res.to_chrome_trace(args.trace)
        except OSError as err:
            raise ScenarioError(f"--trace: cannot write {args.trace}: {err.strerror or err}",
                                field="--trace") from None
    if args.json:
        print(res.to_json())
        return 0
    if not args.quiet:
        for w in res.warnings:
            Console(stderr=True, highlight=False, soft_wrap=True).print(f"warning: {w}")
    per = sc.cluster.gpus_per_node
    out.print(f"[bold]{res.name}[/]: {res.gpus:,} GPUs, {sc.cluster.gpu.name or 'gpu'} "
              f"({-(-res.gpus // per):,} node{'s' if res.gpus > per else ''} of {per})")
    how = "fastest that fits" if res.fits_memory else "none fits: fastest of the least memory"
    for line in _layout_lines(res, res.auto_choices, how):
        out.print(line)
    out.print(f"  step time {res.step_time_s:.3f} s    tokens/s {res.tokens_per_s:,.0f}")
    out.print(f"  MFU       {res.mfu:.1%}  ({res.model_tflops_per_gpu:.1f} TFLOP/s per GPU)   "
              f"HFU {res.hfu:.1%}  ({res.hardware_tflops_per_gpu:.1f})")
    out.print(f"  bubble    {res.bubble_fraction:.1%} of the critical stage's busy time "
              f"({res.breakdown_s['bubble'] / res.step_time_s:.1%} of the step)")
    fit = "[green]fits[/]" if res.fits_memory else "[red]does not fit[/]"
    out.print(f"  memory    {res.memory_gib_per_gpu:.1f} GiB per GPU: {fit}")
    if res.moe_routing:
        out.print(_routing_line(res.moe_routing, sc.workload.moe.rank_capacity_factor))
    t = Table(title="Where the step goes (critical stage)")
    t.add_column("part")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    for k, v in res.breakdown_s.items():
        if v > 0:
            t.add_row(k.replace("_", " "), f"{v:.3f}", f"{v / res.step_time_s:.1%}")
    out.print(t)
    if len(res.links):
        _fabric_tables(res, out)
    out.print(f"  fidelity {res.fidelity}, calibration {res.calibration}, "
              f"simulated in {res.sim_wall_s:.2f} s")
    if args.trace:
        out.print(f"  trace written to {args.trace} (open in https://ui.perfetto.dev)")
    return 0


def _routing_line(r: dict, budget: float | None) -> str:
    """The MoE router's cost in one line: the busiest expert-parallel rank (the pace of each
    MoE layer), the busiest expert, what the capacity dropped, and the worst rank load drawn
    against a sync-free dispatch's budget."""
    line = (f"  routing   busiest rank {r['busiest_rank_load']:.2f}x its share, busiest expert "
            f"{r['busiest_expert_load']:.2f}x, dropped {r['dropped_fraction']:.1%}")
    if budget is not None:
        line += f", worst rank {r['worst_rank_load']:.2f}x of a {budget:g}x budget"
    return line


SUMMARY_ROWS = 5
"""Links and collectives the fabric part of the ``simulate`` summary lists."""


def _fabric_tables(res, out: Console) -> None:
    """What the fabric did to the step: its hottest links (deepest queues under the fluid
    model, else the most flows at once) with the collective that loaded each, the congestion
    totals, and the collectives contention slowed most against NCCL's non-blocking time."""
    lk = res.links
    fluid = bool(lk.max_queue_bytes.notna().any())
    hot = lk.sort_values(["max_queue_bytes", "pause_s", "utilisation"] if fluid else
                         ["max_flows", "utilisation"], ascending=False, kind="stable")
    t = Table(title="Hottest links" + (" (deepest queue first)" if fluid else
                                       " (most flows at once first)"))
    cols = ["link", "tier", "utilisation", "max flows"] + \
        (["queue MB", "ECN-marked", "pause ms", "dropped MB"] if fluid else []) + \
        ["loaded most by"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("link", "loaded most by") else "right")
    for r in hot.head(SUMMARY_ROWS).itertuples():
        cong = [f"{r.max_queue_bytes / 1e6:.2f}", f"{r.ecn_mark_rate:.1%}",
                f"{r.pause_s * 1e3:.3f}", f"{r.dropped_bytes / 1e6:.2f}"] if fluid else []
        t.add_row(r.link, r.tier, f"{r.utilisation:.1%}", str(r.max_flows), *cong,
                  r.collective)
    out.print(t)
    if fluid:
        out.print(f"  congestion per step: deepest queue {lk.max_queue_bytes.max() / 1e6:.2f} MB, "
                  f"PFC pause {lk.pause_s.sum() * 1e3:,.3f} ms over "
                  f"{int((lk.pause_s > 0).sum()):,} links, ECN-marked "
                  f"{(lk.ecn_mark_rate * lk.bytes).sum() / 1e9:,.2f} GB "
                  f"({(lk.ecn_mark_rate * lk.bytes).sum() / lk.bytes.sum():.3%} of the bytes "
                  f"links carried), dropped {lk.dropped_bytes.sum() / 1e6:,.2f} MB")
    co = res.collectives.assign(
        added_s=lambda d: d.calls_per_step * (d.time_s - d.nonblocking_s))
    co = co[co.added_s > 0].sort_values("added_s", ascending=False, kind="stable")
    if not len(co):
        out.print("  no collective ran slower than on a non-blocking fabric")
        return
    t = Table(title="Collectives the fabric slowed (against NCCL's time on a non-blocking "
                    "fabric)")
    for c in ("collective", "MB", "calls/step", "fabric ms", "non-blocking ms", "slowdown",
              "added s/step", "hottest link"):
        t.add_column(c, justify="left" if c in ("collective", "hottest link") else "right")
    for r in co.head(SUMMARY_ROWS).itertuples():
        t.add_row(f"{r.kind} {r.group} stage {r.stage}", f"{r.bytes / 1e6:,.1f}",
                  f"{r.calls_per_step:,}", f"{r.time_s * 1e3:,.3f}",
                  f"{r.nonblocking_s * 1e3:,.3f}", f"{r.slowdown:.2f}x", f"{r.added_s:.3f}",
                  r.hottest_link)
    out.print(t)
    out.print("  added s/step: calls x (fabric - non-blocking) time, before any overlap with "
              "compute hides it")


TOPOLOGY_SHOW = 40
"""Switches and cables ``clustersim topology`` lists without ``--all`` (failed ones always)."""


def topology(args, out: Console) -> int:
    sc = Scenario.load(args.scenario, args.overrides)
    f = build_fabric_for(sc)
    switches = [n for n, t in zip(f.names, f.tier) if t >= 0]
    lo = np.minimum(f.tier[f.link_src], f.tier[f.link_dst])
    keep = (f.link_src < f.link_dst) & (lo >= (-1 if args.nics else 0))
    cables = [f"{f.names[a]}-{f.names[b]}" if f.tier[a] <= f.tier[b] else
              f"{f.names[b]}-{f.names[a]}"
              for a, b in zip(f.link_src[keep], f.link_dst[keep])]
    gbps = (f.capacity[keep] * 8 / 1e9).round(1)
    down = f.failed[keep]
    if args.json:
        print(json.dumps({"switches": switches, "cables": [
            {"cable": c, "gbps": float(g), "failed": bool(d)}
            for c, g, d in zip(cables, gbps, down)]}))
        return 0
    kinds, counts = np.unique(f.kind[f.tier >= -1], return_counts=True)
    out.print(f"[bold]{sc.name}[/]: {sc.cluster.topology.kind}, " + ", ".join(
        f"{c:,} {k}" for k, c in zip(kinds, counts)))
    show = len(switches) if args.all else TOPOLOGY_SHOW
    out.print(f"switches ({len(switches):,}): " + " ".join(switches[:show]) +
              (" ..." if show < len(switches) else ""))
    t = Table(title=f"cables ({len(cables):,}; name them in faults.failed_links / "
                    f"degraded_links)")
    for c in ("cable", "Gb/s", "state"):
        t.add_column(c)
    failed = [k for k, d in enumerate(down) if d]
    keep = range(len(cables)) if args.all else sorted(set(range(min(show, len(cables))))
                                                      | set(failed))
    for k in keep:
        t.add_row(cables[k], f"{gbps[k]:g}", "failed" if down[k] else "up")
    out.print(t)
    if len(keep) < len(cables):
        out.print(f"  {len(cables) - len(keep):,} more cables (--all lists every switch and "
                  f"cable, --json them as data)")
    return 0
