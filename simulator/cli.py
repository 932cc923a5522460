"""The `clustersim` command line. Bad input: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from simulator import cli_failures, cli_sweep
from simulator.errors import ScenarioError
from simulator.fabric import FabricError

EXIT_BAD_INPUT = 2
PIPE_WIDTH = 132
"""Console width when stdout is a pipe or file (rich would assume 80 and squeeze tables)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of usage + message
        sys.stderr.write(f"clustersim: error: {message} (see {self.prog} --help)\n")
        sys.exit(EXIT_BAD_INPUT)


def _count(minimum: int):
    """argparse type: an integer >= ``minimum`` (else argparse's one-line error, exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value
    parse.__name__ = f"integer >= {minimum}"
    return parse


def _add_scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field, e.g. --set parallel.tp=4 (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="clustersim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    pre = sub.add_parser("presets", help="list built-in models, GPUs and topologies")
    pre.add_argument("--json", action="store_true")
    mem = sub.add_parser("memory", help="parameters, FLOPs per step and memory per GPU")
    _add_scenario_args(mem)
    sim = sub.add_parser("simulate", help="simulate one training step")
    _add_scenario_args(sim)
    sim.add_argument("--trace", metavar="FILE", help="write a Chrome / Perfetto trace")
    tp_ = sub.add_parser("topology", help="list the scenario fabric's switches and cables")
    tp_.add_argument("scenario", help="scenario YAML file")
    tp_.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    tp_.add_argument("--nics", action="store_true", help="also list NIC-to-leaf cables")
    tp_.add_argument("--json", action="store_true")
    nt = sub.add_parser("nccl-tests", help="run a collective through the simulated fabric")
    nt.add_argument("op", metavar="OP", help="all_reduce, all_gather, reduce_scatter, alltoall, "
                    "sendrecv")
    nt.add_argument("--gpus", type=_count(2), required=True)
    nt.add_argument("--gpu", default="h100-sxm")
    nt.add_argument("--gpus-per-node", type=_count(1), default=8)
    nt.add_argument("--topology", default="{kind: spine-leaf}", help="preset name or mapping")
    nt.add_argument("--routing", default="ecmp", choices=["ecmp", "spray", "adaptive"])
    nt.add_argument("--queue-pairs", type=_count(1), default=1)
    nt.add_argument("-b", "--minbytes", default="8")
    nt.add_argument("-e", "--maxbytes", default="128M")
    nt.add_argument("-f", "--stepfactor", type=_count(2), default=2)
    nt.add_argument("--seed", type=_count(0), default=0)
    nt.add_argument("--cc", default=None, choices=["none", "dcqcn"],
                    help="none: ideal max-min sharing (default); dcqcn: the fluid model")
    nt.add_argument("--pfc", default=None, choices=["on", "off"])
    nt.add_argument("--network", default=None, help="inline network section (YAML mapping)")
    nt.add_argument("--json", action="store_true")
    fl = sub.add_parser("flows", help="simulate arbitrary flows on a fabric")
    fl.add_argument("flows", metavar="FLOWS.csv", help="columns src_gpu, dst_gpu, bytes, start_s")
    fl.add_argument("--topology", required=True, help="preset name or mapping")
    fl.add_argument("--gpus", type=_count(1), help="GPUs of the fabric (default: its size or the "
                    "largest id + 1)")
    fl.add_argument("--gpus-per-node", type=_count(1), default=1)
    fl.add_argument("--gpu", default="h100-sxm")
    fl.add_argument("--routing", default=None, choices=["ecmp", "spray", "adaptive"])
    fl.add_argument("--cc", default=None, choices=["none", "dcqcn"],
                    help="none: ideal max-min sharing (default); dcqcn: the fluid model")
    fl.add_argument("--pfc", default=None, choices=["on", "off"])
    fl.add_argument("--network", default=None, help="inline network section (YAML mapping)")
    fl.add_argument("--seed", type=_count(0), default=0)
    fl.add_argument("--out", required=True, metavar="FCT.csv")
    fl.add_argument("--trace", metavar="FILE", help="write a Chrome / Perfetto trace (flows, "
                    "and queue-depth / pause counters under --cc dcqcn or --pfc on)")
    cli_failures.add_parser(sub, _add_scenario_args, _count)
    cli_sweep.add_parsers(sub, _count)
    return parser


def _cmd_presets(args, out: Console) -> int:
    from topologies import list_gpus, list_topologies, load_gpu, topology_mapping
    from workloads import list_models, load_model
    from workloads.params import count_params

    models = [load_model(n) for n in list_models()]
    gpus = [load_gpu(n) for n in list_gpus()]
    topos = [topology_mapping(n) for n in list_topologies()]
    if args.json:
        print(json.dumps({"models": [m.model_dump(exclude_none=True) for m in models],
                          "gpus": [g.model_dump() for g in gpus], "topologies": topos}))
        return 0
    t = Table(title="Models")
    for c in ("name", "layers", "hidden", "heads", "kv groups", "experts", "params (B)", "source"):
        t.add_column(c)
    for m in models:
        n = count_params(m, m.max_position_embeddings or 2048)
        t.add_row(m.name, str(m.num_layers), str(m.hidden_size), str(m.num_attention_heads),
                  str(m.query_groups) if not m.multi_latent_attention else "MLA",
                  f"{m.num_experts} top-{m.moe_top_k}" if m.is_moe else "-",
                  f"{n.total / 1e9:.1f}" + (f" ({n.active / 1e9:.1f} act.)" if m.is_moe else ""),
                  m.source or "")
    out.print(t)
    t = Table(title="GPUs")
    for c in ("name", "BF16 TFLOP/s", "FP8 TFLOP/s", "HBM GiB", "HBM GB/s", "NVLink GB/s/dir"):
        t.add_column(c)
    for g in gpus:
        t.add_row(g.name, f"{g.bf16_tflops:g}", f"{g.fp8_tflops:g}" if g.fp8_tflops else "-",
                  f"{g.hbm_gib:g}", f"{g.hbm_gbyte_per_s:g}", f"{g.nvlink_gbyte_per_s:g}")
    out.print(t)
    t = Table(title="Topologies")
    for c in ("name", "kind", "NIC Gb/s", "source"):
        t.add_column(c)
    for d in topos:
        t.add_row(d["name"], d["kind"], f"{d.get('nic_gbps', '')}", d.get("source", ""))
    out.print(t)
    return 0


def _layout_lines(x, auto: dict, how: str) -> list[str]:
    """The layout line (from a Layout or a Result: same field names) and the auto choices."""
    lines = [f"  layout    tp {x.tp}  pp {x.pp}  dp {x.dp}  cp {x.cp}  ep {x.ep}  vpp {x.vpp}  "
             f"micro_batch {x.micro_batch}  micro-batches {x.num_micro_batches}  "
             f"schedule {x.schedule}  recompute {x.recompute}"]
    if auto:
        picked = ", ".join(f"{k} {v}" for k, v in auto.items())
        lines.append(f"  auto      {picked} ({how})")
    return lines


def _gib(x: float) -> str:
    return f"{x / 2**30:,.2f}"


def _cmd_memory(args, out: Console) -> int:
    from simulator.accounting import account
    from simulator.scenario import Scenario

    acc = account(Scenario.load(args.scenario, args.overrides))
    if args.json:
        print(json.dumps(acc.to_dict()))
        return 0
    d = acc.to_dict()
    lay = acc.layout
    out.print(f"[bold]{d['name']}[/]: {d['model']} on {lay.gpus:,} x {d['gpu']}")
    for line in _layout_lines(lay, acc.auto_choices, "least memory; `simulate` picks the fastest"):
        out.print(line)
    active = f" ({d['active_params'] / 1e9:,.1f}B active)" if acc.params.active != acc.params.total else ""
    out.print(f"  params    {d['params'] / 1e9:,.1f}B{active}")
    out.print(f"  FLOPs     model {acc.flops.model:.4g} / hardware {acc.flops.hardware:.4g} per step")
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
    return 0


def _cmd_simulate(args, out: Console) -> int:
    from simulator.scenario import Scenario
    from simulator.simulate import simulate

    res = simulate(Scenario.load(args.scenario, args.overrides))
    if args.trace:
        try:
            res.to_chrome_trace(args.trace)
        except OSError as err:
            raise ScenarioError(f"--trace: cannot write {args.trace}: {err.strerror}",
                                field="--trace") from None
    if args.json:
        print(res.to_json())
        return 0
    out.print(f"[bold]{res.name}[/]: {res.gpus:,} GPUs")
    for line in _layout_lines(res, res.auto_choices, "fastest that fits"):
        out.print(line)
    out.print(f"  step time {res.step_time_s:.3f} s    tokens/s {res.tokens_per_s:,.0f}")
    out.print(f"  MFU       {res.mfu:.1%}  ({res.model_tflops_per_gpu:.1f} TFLOP/s per GPU)   "
              f"HFU {res.hfu:.1%}  ({res.hardware_tflops_per_gpu:.1f})")
    out.print(f"  bubble    {res.bubble_fraction:.1%} of busy time")
    fit = "[green]fits[/]" if res.fits_memory else "[red]does not fit[/]"
    out.print(f"  memory    {res.memory_gib_per_gpu:.1f} GiB per GPU: {fit}")
    t = Table(title="Where the step goes (critical stage)")
    t.add_column("part")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    for k, v in res.breakdown_s.items():
        if v > 0:
            t.add_row(k.replace("_", " "), f"{v:.3f}", f"{v / res.step_time_s:.1%}")
    out.print(t)
    if len(res.links):
        t = Table(title="Hottest links")
        for c in ("link", "tier", "utilisation", "GB", "max flows"):
            t.add_column(c, justify="right")
        for r in res.links.head(5).itertuples():
            t.add_row(r.link, r.tier, f"{r.utilisation:.1%}", f"{r.bytes / 1e9:,.1f}",
                      str(r.max_flows))
        out.print(t)
        if res.links.max_queue_bytes.notna().any():     # the DCQCN / PFC fluid model ran
            lk = res.links
            out.print(f"  congestion (per step): deepest queue {lk.max_queue_bytes.max() / 1e6:.2f}"
                      f" MB on {lk.link[lk.max_queue_bytes.idxmax()]}, PFC pause "
                      f"{lk.pause_s.sum() * 1e3:.3f} ms over {int((lk.pause_s > 0).sum())} links, "
                      f"ECN-marked {(lk.ecn_mark_rate * lk.bytes).sum() / 1e6:.1f} MB, "
                      f"dropped {lk.dropped_bytes.sum() / 1e6:.2f} MB")
    out.print(f"  fidelity {res.fidelity}, calibration {res.calibration}, "
              f"simulated in {res.sim_wall_s:.2f} s")
    if args.trace:
        out.print(f"  trace written to {args.trace} (open in https://ui.perfetto.dev)")
    return 0


def _cmd_topology(args, out: Console) -> int:
    import numpy as np

    from simulator.scenario import Scenario
    from simulator.simulate import build_fabric_for

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
    out.print("switches: " + " ".join(switches))
    t = Table(title="cables (name them in faults.failed_links / degraded_links)")
    for c in ("cable", "Gb/s", "state"):
        t.add_column(c)
    for c, g, d in zip(cables, gbps, down):
        t.add_row(c, f"{g:g}", "failed" if d else "up")
    out.print(t)
    return 0


def _network_flags(args):
    """The network section from --network, with --cc / --pfc on top, and the same or None when
    neither congestion control nor PFC is on (ideal max-min sharing)."""
    import yaml
    from pydantic import ValidationError

    from simulator.errors import from_validation_error
    from simulator.network_config import NetworkConfig

    net = NetworkConfig()
    if args.network:
        try:
            net = NetworkConfig.model_validate(yaml.safe_load(args.network) or {})
        except yaml.YAMLError:
            raise ScenarioError("--network: not a YAML mapping", field="--network") from None
        except ValidationError as err:
            raise ScenarioError(f"--network.{from_validation_error(err)}",
                                field="--network") from None
    cc = args.cc or (net.congestion_control if args.network else "none")
    pfc = (args.pfc == "on") if args.pfc else (net.pfc if args.network else False)
    net = net.model_copy(update={"congestion_control": cc, "pfc": pfc})
    return net, (net if (cc == "dcqcn" or pfc) else None)


def _cmd_nccl_tests(args, out: Console) -> int:
    from simulator.network import nccl_tests, parse_size

    _, fluid = _network_flags(args)
    df = nccl_tests(args.op, gpus=args.gpus, gpu=args.gpu, topology=args.topology,
                    gpus_per_node=args.gpus_per_node, routing=args.routing,
                    queue_pairs=args.queue_pairs, min_bytes=parse_size(args.minbytes, "-b"),
                    max_bytes=parse_size(args.maxbytes, "-e"), factor=args.stepfactor,
                    seed=args.seed, net=fluid)
    if args.json:
        print(json.dumps(df.to_dict(orient="records")))
        return 0
    t = Table(title=f"{args.op} on {args.gpus} x {args.gpu} ({args.routing}, simulated)")
    cong = "max_queue_bytes" in df
    for c in ("size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)") + (
            ("max queue (KB)", "pause (us)", "marked (MB)", "dropped (MB)") if cong else ()):
        t.add_column(c, justify="right")
    for r in df.itertuples():
        extra = (f"{r.max_queue_bytes / 1e3:,.0f}", f"{r.pause_s * 1e6:,.1f}",
                 f"{r.marked_bytes / 1e6:,.2f}", f"{r.dropped_bytes / 1e6:,.2f}") if cong else ()
        t.add_row(f"{r.bytes:,}", f"{r.time_s * 1e6:,.1f}", f"{r.algbw_gbyte_per_s:.2f}",
                  f"{r.busbw_gbyte_per_s:.2f}", *extra)
    out.print(t)
    return 0


def _cmd_flows(args, out: Console) -> int:
    import pandas as pd

    from simulator.network import make_fabric, run_flow_file, topology_spec
    from topologies.gpus import load_gpu

    net, fluid = _network_flags(args)
    cc, pfc = net.congestion_control, net.pfc
    try:
        frame = pd.read_csv(args.flows)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ScenarioError(f"FLOWS: cannot read {args.flows}: {err}", field="FLOWS") from None
    spec = topology_spec(args.topology)
    gpus = args.gpus
    if gpus is None:
        sized = getattr(spec, "leaves", None) and getattr(spec, "hosts_per_leaf", None)
        gpus = spec.leaves * spec.hosts_per_leaf * args.gpus_per_node // (
            spec.nics_per_node or args.gpus_per_node) if sized else \
            int(max(frame.src_gpu.max(), frame.dst_gpu.max())) + 1
    try:
        gpu = load_gpu(args.gpu)
    except ValueError as err:
        raise ScenarioError(f"--gpu: {err}", field="--gpu") from None
    fabric = make_fabric(spec, gpus=gpus, gpus_per_node=args.gpus_per_node, gpu=gpu,
                         seed=args.seed)
    flows, links = run_flow_file(frame, fabric, routing=args.routing or net.routing,
                                 queue_pairs=net.queue_pairs,
                                 net=fluid,
                                 buffer_mib=spec.buffer_mib, seed=args.seed)
    try:
        flows.to_csv(args.out, index=False)
        links.to_csv(str(args.out).removesuffix(".csv") + "_links.csv", index=False)
    except OSError as err:
        raise ScenarioError(f"--out: cannot write {args.out}: {err.strerror}",
                            field="--out") from None
    if args.trace:
        from simulator.network import flows_chrome_trace
        try:
            with open(args.trace, "w") as fh:
                json.dump(flows_chrome_trace(flows, links), fh)
        except OSError as err:
            raise ScenarioError(f"--trace: cannot write {args.trace}: {err.strerror}",
                                field="--trace") from None
    if "pause_s" in links:
        out.print(f"fluid model (congestion control {cc}, PFC {'on' if pfc else 'off'}): "
                  f"max queue {links.max_queue_bytes.max() / 1e6:.2f} MB, "
                  f"{int(links.pauses.sum())} pauses ({links.pause_s.sum() * 1e6:.0f} us), "
                  f"dropped {links.dropped_bytes.sum() / 1e6:.2f} MB")
    out.print(f"{len(flows)} flows, makespan {flows.finish_s.max():.6f} s, mean FCT "
              f"{flows.fct_s.mean():.6f} s -> {args.out} (+ per-link statistics in "
              f"{str(args.out).removesuffix('.csv')}_links.csv)")
    return 0


COMMANDS = {"presets": _cmd_presets, "memory": _cmd_memory, "simulate": _cmd_simulate,
            "topology": _cmd_topology,
            "nccl-tests": _cmd_nccl_tests, "flows": _cmd_flows, "failures": cli_failures.run,
            "sweep": cli_sweep.run_sweep_cmd, "regress": cli_sweep.run_regress_cmd}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Console(highlight=False, soft_wrap=True,
                  width=None if sys.stdout.isatty() else PIPE_WIDTH)
    try:
        return COMMANDS[args.command](args, out)
    except (ScenarioError, FabricError) as err:
        sys.stderr.write(f"clustersim: error: {err}\n")
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
