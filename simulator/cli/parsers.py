"""The `clustersim` argument parsers (argparse only: building them imports no command)."""

from __future__ import annotations

import argparse
import re
import sys

EXIT_BAD_INPUT = 2
"""Exit code of every input error (one line on stderr)."""


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


_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def positive_number(text: str) -> float:
    """argparse type: a number > 0, optionally with a k / M / B / T suffix (15.6T tokens)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*([kmbgt]?)\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if not 0 < value < 1e30:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


SORTS = {"mfu": False, "step_time_s": True, "tokens_per_s": False}
"""Sort key -> ascending."""


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
    sim.add_argument("--quiet", action="store_true",
                     help="no warning line for fields that have no effect at this fidelity")
    tp_ = sub.add_parser("topology", help="list the scenario fabric's switches and cables")
    tp_.add_argument("scenario", help="scenario YAML file")
    tp_.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    tp_.add_argument("--nics", action="store_true", help="also list NIC-to-leaf cables")
    tp_.add_argument("--all", action="store_true", help="list every switch and cable")
    tp_.add_argument("--json", action="store_true")
    nt = sub.add_parser("nccl-tests", help="run a collective through the simulated fabric")
    nt.add_argument("op", metavar="OP", help="all_reduce, all_gather, reduce_scatter, alltoall, "
                    "sendrecv")
    nt.add_argument("--gpus", type=_count(2), required=True)
    nt.add_argument("--gpu", default=None, help="GPU name (default: the topology preset's GPU, "
                    "else h100-sxm)")
    nt.add_argument("--gpus-per-node", type=_count(1), default=None,
                    help="GPUs of one node, at most one NVLink domain (default: the GPU's, "
                         "8 on HGX, 72 per GB200 NVL72 rack or whole 4-GPU trays of it "
                         "where --gpus are not whole racks: 1,024 run as racks of 64)")
    nt.add_argument("--topology", default="{kind: spine-leaf}", help="preset name or mapping")
    nt.add_argument("--routing", default="ecmp", choices=["ecmp", "spray", "adaptive"])
    nt.add_argument("--queue-pairs", "--qps-per-connection", dest="queue_pairs",
                    type=_count(1), default=None,
                    help="queue pairs per connection, as NCCL_IB_QPS_PER_CONNECTION (default "
                         "1, or --network's)")
    nt.add_argument("--split-data-on-qps", type=int, default=None, choices=[0, 1],
                    help="as NCCL_IB_SPLIT_DATA_ON_QPS: 1 cuts each message over the queue "
                         "pairs, 0 (NCCL's default) sends each whole on the next in turn")
    nt.add_argument("--algo", default=None,
                    choices=["ring", "tree", "nvls", "nvlstree", "collnet"],
                    help="force an algorithm, as NCCL_ALGO (default: NCCL's cost model)")
    nt.add_argument("--proto", default=None, choices=["LL", "LL128", "Simple"],
                    help="force a protocol, as NCCL_PROTO (default: NCCL's cost model)")
    chans = nt.add_mutually_exclusive_group()
    chans.add_argument("--channels-per-nic", type=_count(1), default=None,
                       help="NCCL channels on each NIC rail (default 1; NCCL runs 2, doubling "
                            "the one per NIC it finds; NCCL_MIN/MAX_NCHANNELS = this x NICs)")
    chans.add_argument("--channels", type=_count(1), default=None,
                       help="NCCL channels across nodes, as NCCL_MIN_NCHANNELS = "
                            "NCCL_MAX_NCHANNELS: a multiple of the node's NICs")
    nt.add_argument("--fidelity", default="flow", choices=["flow", "screening"],
                    help="flow: the collective's flows on the fabric (default); screening: "
                         "NCCL's cost model alone, no fabric")
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
    fl.add_argument("--gpu", default=None, help="GPU name (default: the topology preset's GPU, "
                    "else h100-sxm)")
    fl.add_argument("--routing", default=None, choices=["ecmp", "spray", "adaptive"])
    fl.add_argument("--cc", default=None, choices=["none", "dcqcn"],
                    help="none: ideal max-min sharing (default); dcqcn: the fluid model")
    fl.add_argument("--pfc", default=None, choices=["on", "off"])
    fl.add_argument("--network", default=None, help="inline network section (YAML mapping)")
    fl.add_argument("--seed", type=_count(0), default=0)
    fl.add_argument("--out", required=True, metavar="FCT.csv")
    fl.add_argument("--trace", metavar="FILE", help="write a Chrome / Perfetto trace (flows, "
                    "and queue-depth / pause counters under --cc dcqcn or --pfc on)")
    _failures_parser(sub)
    _sweep_parsers(sub)
    return parser


def _failures_parser(sub) -> None:
    p = sub.add_parser("failures", help="a training run under failures: ETTR, effective MFU")
    _add_scenario_args(p)
    when = p.add_mutually_exclusive_group()
    when.add_argument("--days", type=positive_number, help="wall-clock days to run (default 30)")
    when.add_argument("--tokens", type=positive_number,
                      help="train this many tokens (e.g. 15.6T) and report the time to train")
    p.add_argument("--trials", type=_count(1), default=1000, help="Monte-Carlo trials")
    p.add_argument("--plot", metavar="PNG", help="write the ETTR-vs-interval plot")
    p.add_argument("--components", action="store_true",
                   help="list the failure catalogue (names for failures.rates) and exit")


def _sweep_parsers(sub) -> None:
    sw = sub.add_parser("sweep", help="simulate a grid of configurations (local pool or Dask)")
    sw.add_argument("sweep", metavar="SWEEP.yaml")
    sw.add_argument("--out", required=True, metavar="FILE.{csv,parquet}")
    sw.add_argument("--jobs", type=_count(1), default=None, help="worker processes (all cores)")
    sw.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler, e.g. tcp://h:8786")
    sw.add_argument("--resume", action="store_true", help="skip points already in --out")
    sw.add_argument("--fidelity", choices=["analytic", "screening", "flow"],
                    help="override the sweep file's fidelity")
    sw.add_argument("--top", type=_count(0), default=10, help="rows of the best-first table")
    sw.add_argument("--sort", choices=list(SORTS), default="mfu")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.add_argument("--no-cache", action="store_true",
                    help="flow fidelity: solve every fabric collective of every point (by "
                         "default each distinct one is solved once, kept in OUT.cache/)")
    sw.add_argument("--screen-top", type=_count(1), default=None, metavar="K",
                    help="evaluate every point analytically first, then the best K (and those "
                         "within --screen-margin of them) at the sweep's fidelity")
    sw.add_argument("--screen-margin", type=float, default=None, metavar="M",
                    help="fraction of the K-th best analytic MFU within which points also go "
                         "on (default: simulator.sweep.runner.SCREEN_MARGIN, 0.02)")
    rg = sub.add_parser("regress", help="re-simulate a baseline of MFU; exit 1 on drift")
    rg.add_argument("baseline", metavar="BASELINE.csv")
    rg.add_argument("--tolerance", type=float, default=None,
                    help="largest |delta mfu| allowed (absolute, default 0.005)")
    rg.add_argument("--update", action="store_true", help="rewrite the baseline's numbers")
    rg.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    rg.add_argument("--jobs", type=_count(1), default=None)
