"""`clustersim nccl-tests` and `flows`: collectives and arbitrary flows on a simulated fabric."""

from __future__ import annotations

import io
import json

import pandas as pd
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from simulator.cli.first_run import say_if_first_fluid_run
from simulator.config.network import NetworkConfig
from simulator.config.topology import topology_spec
from simulator.errors import ScenarioError, from_validation_error, read_input
from simulator.network.alpha_beta import PROTOCOL_KINDS
from simulator.network.build import make_fabric
from simulator.network.flowfile import flows_chrome_trace, run_flow_file, validate_flows
from simulator.network.nccl_tests import (
    DEFAULT_GPU,
    NCCL_OPS,
    nccl_tests,
    parse_size,
    scan_sizes,
)
from topologies.gpus import load_gpu


def _network_flags(args):
    """The network section from --network, with --cc / --pfc on top, and the same or None when
    neither congestion control nor PFC is on (ideal max-min sharing)."""
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


def _size_bar(args) -> Progress:
    """A progress bar over the scan's sizes on stderr, shown only on a terminal (never with
    --json, whose stdout is one JSON object)."""
    sizes = len(scan_sizes(parse_size(args.minbytes, "-b"), parse_size(args.maxbytes, "-e"),
                           args.stepfactor))
    err = Console(stderr=True)
    bar = Progress(TextColumn(f"{args.op} on {args.gpus} GPUs"), BarColumn(),
                   MofNCompleteColumn(), TextColumn("sizes"), TimeElapsedColumn(), console=err,
                   transient=True, disable=args.json or not err.is_terminal)
    bar.add_task("sizes", total=max(sizes, 1))
    return bar


def _run_scan(args, net: NetworkConfig, fluid, proto, bar: Progress) -> pd.DataFrame:
    """``nccl_tests`` with the command's flags, advancing ``bar`` as each size is done."""
    return nccl_tests(args.op, gpus=args.gpus, gpu=args.gpu, topology=args.topology,
                      gpus_per_node=args.gpus_per_node, routing=args.routing,
                      queue_pairs=args.queue_pairs or net.connection_qps,
                      split_data_on_qps=bool(net.nccl.split_data_on_qps
                                             if args.split_data_on_qps is None
                                             else args.split_data_on_qps),
                      min_bytes=parse_size(args.minbytes, "-b"),
                      max_bytes=parse_size(args.maxbytes, "-e"), factor=args.stepfactor,
                      seed=args.seed, net=fluid, algorithm=args.algo, protocol=proto,
                      channels_per_nic=args.channels_per_nic or net.nccl.channels_per_nic,
                      channels=None if args.channels_per_nic else
                      args.channels or net.nccl.channels, fidelity=args.fidelity,
                      on_size=lambda _: bar.advance(bar.task_ids[0]))


def nccl_tests_cmd(args, out: Console) -> int:
    net, fluid = _network_flags(args)
    if fluid is not None:
        say_if_first_fluid_run()
    # --network's nccl.protocol binds what it binds in a scenario (all-reduce, all-gather,
    # reduce-scatter); --proto is checked against the collective
    proto = args.proto or (net.nccl.protocol if net.nccl.protocol != "auto" and
                           NCCL_OPS.get(args.op) in PROTOCOL_KINDS else None)
    with _size_bar(args) as bar:
        df = _run_scan(args, net, fluid, proto, bar)
    if args.json:
        print(json.dumps(df.to_dict(orient="records")))
        return 0
    gpu = args.gpu or topology_spec(args.topology).gpu or DEFAULT_GPU
    t = Table(title=f"{args.op} on {args.gpus} x {gpu} ({args.routing}, simulated)")
    cong = "max_queue_bytes" in df
    for c in ("size (B)", "algorithm", "protocol", "time (us)", "algbw (GB/s)", "busbw (GB/s)") + (
            ("max queue (KB)", "pause (us)", "marked (MB)", "dropped (MB)") if cong else ()):
        t.add_column(c, justify="right")
    for r in df.itertuples():
        extra = (f"{r.max_queue_bytes / 1e3:,.0f}", f"{r.pause_s * 1e6:,.1f}",
                 f"{r.marked_bytes / 1e6:,.2f}", f"{r.dropped_bytes / 1e6:,.2f}") if cong else ()
        t.add_row(f"{r.bytes:,}", r.algorithm, r.protocol, f"{r.time_s * 1e6:,.1f}",
                  f"{r.algbw_gbyte_per_s:.2f}",
                  f"{r.busbw_gbyte_per_s:.2f}", *extra)
    out.print(t)
    return 0


MAX_INFERRED_GPUS = 131_072
"""Largest fabric ``flows`` sizes from the GPU ids alone (the largest published clusters)."""


def flows(args, out: Console) -> int:
    net, fluid = _network_flags(args)
    if fluid is not None:
        say_if_first_fluid_run()
    cc, pfc = net.congestion_control, net.pfc
    try:
        frame = pd.read_csv(io.StringIO(read_input(args.flows, "FLOWS")))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ScenarioError(f"FLOWS: cannot read {args.flows}: {err}", field="FLOWS") from None
    validate_flows(frame)
    spec = topology_spec(args.topology)
    gpus = args.gpus
    if gpus is None:
        sized = getattr(spec, "leaves", None) and getattr(spec, "hosts_per_leaf", None)
        gpus = spec.leaves * spec.hosts_per_leaf * args.gpus_per_node // (
            spec.nics_per_node or args.gpus_per_node) if sized else \
            int(max(frame.src_gpu.max(), frame.dst_gpu.max())) + 1
        if not sized:
            if gpus > MAX_INFERRED_GPUS:
                raise ScenarioError(f"FLOWS: the largest GPU id ({gpus - 1:,}) would size the "
                                    f"fabric to {gpus:,} GPUs; give --gpus or a sized "
                                    f"--topology", field="FLOWS")
            out.print(f"fabric sized to {gpus:,} GPUs by the largest GPU id in {args.flows} "
                      f"(--gpus to set it)")
    try:
        gpu = load_gpu(args.gpu or spec.gpu or DEFAULT_GPU)
    except ValueError as err:
        raise ScenarioError(f"--gpu: {err}", field="--gpu") from None
    fabric = make_fabric(spec, gpus=gpus, gpus_per_node=args.gpus_per_node, gpu=gpu,
                         seed=args.seed)
    flows, links = run_flow_file(frame, fabric, routing=args.routing or net.routing,
                                 queue_pairs=net.connection_qps,
                                 net=fluid,
                                 buffer_mib=spec.buffer_mib, seed=args.seed)
    try:
        flows.to_csv(args.out, index=False)
        links.to_csv(str(args.out).removesuffix(".csv") + "_links.csv", index=False)
    except OSError as err:
        raise ScenarioError(f"--out: cannot write {args.out}: {err.strerror or err}",
                            field="--out") from None
    if args.trace:
        try:
            with open(args.trace, "w") as fh:
                json.dump(flows_chrome_trace(flows, links), fh)
        except OSError as err:
            raise ScenarioError(f"--trace: cannot write {args.trace}: {err.strerror or err}",
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
