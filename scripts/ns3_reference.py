"""Write the packet-level reference runs of the multi-hop PFC suite (validation/ns3_suite.py).

For each case, draw and run (with the incast, and the victims alone where the case has them)
this writes the inputs of the ns-3 RDMA model of the HPCC project (`scratch/third`: topology,
flow and config files) from the case's scenario description, runs the simulator, and parses
its outputs (FCT, PFC events, queue-length histograms) into the CSV files of
validation/ns3_suite/. The simulator is built outside this project (its README gives the
repository, commit and build command); point ``--ns3`` at its `simulation/` directory.

    python scripts/ns3_reference.py --ns3 /tmp/hpcc/src/simulation [--cases a,b] [--jobs 2]

``--exact`` runs `scratch/third_exact` instead: the same program at picosecond resolution
(validation/ns3_suite_exact/README.md gives the change), so that a packet takes its exact
serialization time rather than the whole nanoseconds below it, and writes
validation/ns3_suite_exact/. ``--held-out`` runs the held-out cases (ns3_suite.HELD_OUT) the
same way into validation/ns3_held_out/.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation.ns3_suite import (  # noqa: E402
    ALL_CASES,
    CASES,
    EXACT_SUITE_DIR,
    HELD_OUT,
    HELD_OUT_DIR,
    HELD_OUT_JITTER_CASES,
    JITTER_CASES,
    JITTERS,
    QUEUE_TRACE_DRAWS,
    SUITE_DIR,
    Case,
    jittered,
)
from validation.ns3_routing import DPORT_PER_DRAW, export_topology, reference_ports  # noqa: E402

PROGRAM = {False: "third", True: "third_exact"}
"""The scratch program of a run: `third`, or at picosecond resolution (``--exact``)."""
TRACE_TIME_PER_NS = {False: 1, True: 1000}
"""Time units per ns in the packet trace (mix.tr): the simulator's resolution; the exact
program prints every other output in ns."""

T0_S = 2.0
"""The simulator's flows start at 2 s (as in S1; its files keep absolute ns)."""
STOP_S = 2.2
OUTPUTS = ("flows", "cnps", "pauses", "queues", "drops", "queue_trace", "wall")
"""The CSV files a run writes (``--only`` picks some)."""
QLEN_DUMP_NS = 100_000_000
"""`third` dumps its queue-length histograms at multiples of 100 ms (hard-coded)."""


def config_text(case: Case, d: Path, trace: bool = False) -> str:
    net = case.net()
    dc, ecn = net.dcqcn, net.ecn
    rates = (25e9, 50e9, 100e9, 200e9, 400e9)
    kmap = lambda kb: " ".join(f"{r:.0f} {kb * r / 100e9:g}" for r in rates)  # noqa: E731
    pmap = " ".join(f"{r:.0f} {ecn.pmax:g}" for r in rates)
    qcn = 1 if net.congestion_control == "dcqcn" else 0
    return f"""ENABLE_QCN {qcn}
USE_DYNAMIC_PFC_THRESHOLD 1
PACKET_PAYLOAD_SIZE {net.mtu_bytes}
TOPOLOGY_FILE {d}/topology.txt
FLOW_FILE {d}/flow.txt
TRACE_FILE {d}/trace.txt
TRACE_OUTPUT_FILE {d}/mix.tr
FCT_OUTPUT_FILE {d}/fct.txt
PFC_OUTPUT_FILE {d}/pfc.txt
SIMULATOR_STOP_TIME {STOP_S}
CC_MODE 1
ALPHA_RESUME_INTERVAL {dc.alpha_update_us:g}
RATE_DECREASE_INTERVAL {dc.rate_decrease_us:g}
CLAMP_TARGET_RATE 0
RP_TIMER {dc.rate_increase_timer_us:g}
EWMA_GAIN {dc.g:.8f}
FAST_RECOVERY_TIMES {dc.fast_recovery_steps}
RATE_AI {dc.ai_mbps:g}Mb/s
RATE_HAI {dc.hai_mbps:g}Mb/s
MIN_RATE {dc.min_rate_mbps:g}Mb/s
DCTCP_RATE_AI 1000Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN 0
GLOBAL_T 1
VAR_WIN 0
FAST_REACT 0
U_TARGET 0.95
MI_THRESH 0
INT_MULTI 1
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.05
PINT_PROB 1.0
RATE_BOUND 1
ACK_HIGH_PRIO 0
LINK_DOWN 0 0 0
ENABLE_TRACE {int(trace)}
KMAX_MAP {len(rates)} {kmap(ecn.kmax_kb)}
KMIN_MAP {len(rates)} {kmap(ecn.kmin_kb)}
PMAX_MAP {len(rates)} {pmap}
BUFFER_SIZE {case.buffer_mib:g}
QLEN_MON_FILE {d}/qlen.txt
QLEN_MON_START {int(T0_S * 1e9)}
QLEN_MON_END {int(T0_S * 1e9) + QLEN_DUMP_NS}
"""


def flow_text(frame: pd.DataFrame, draw: int) -> str:
    """`third` flow file: src dst pg dport size start_s, sorted by start (it reads in order).
    The draw's destination port makes ECMP hash other paths."""
    f = frame.sort_values(["start_s", "flow"], kind="stable")
    rows = [f"{int(r.src_gpu)} {int(r.dst_gpu)} 3 {DPORT_PER_DRAW * draw} {int(r.bytes)} "
            f"{T0_S + r.start_s:.9f}" for r in f.itertuples()]
    return f"{len(rows)}\n" + "\n".join(rows) + "\n"


def run_one(ns3: str, name: str, draw: int, alone: bool, jitter: int = 0,
            exact: bool = False) -> dict:
    """One run of a case and draw (``jitter`` k > 0: draw 1 of :func:`jittered` (case, k));
    ``exact``: at picosecond resolution, one traced run (its wall time includes the trace)."""
    case = jittered(ALL_CASES[name], jitter) if jitter else ALL_CASES[name]
    frame = case.frame(alone)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        topo, port, inport = export_topology(case, draw)
        (d / "topology.txt").write_text(topo)
        (d / "flow.txt").write_text(flow_text(frame, draw))
        n_sw = int(topo.split()[1])
        (d / "trace.txt").write_text(f"{n_sw}\n" + " ".join(
            str(case.hosts + k) for k in range(n_sw)) + "\n")
        env = {**os.environ, "NS_GLOBAL_VALUE": f"RngRun={draw}",
               "LD_LIBRARY_PATH": f"{ns3}/build"}
        if not case.net().pfc:
            env["NS_ATTRIBUTE_DEFAULT"] = "ns3::QbbNetDevice::QbbEnabled=0"
        # the same run twice: untraced (timed; its outputs are kept) and with the switches'
        # packet trace (only for each flow's path); ``exact``: the traced run alone, whose
        # outputs are the same
        wall = 0.0
        for trace in (True,) if exact else (True, False):
            (d / "config.txt").write_text(config_text(case, d, trace))
            t = time.perf_counter()
            out = subprocess.run([f"{ns3}/build/scratch/{PROGRAM[exact]}",
                                  str(d / "config.txt")],
                                 cwd=ns3, env=env, check=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True).stdout
            wall = time.perf_counter() - t
            if trace:
                ev = _read_trace(d / "mix.tr", TRACE_TIME_PER_NS[exact])
                paths = _parse_paths(ev, port)
                cnps = _parse_cnps(ev, frame, draw, port, case.fabric(draw))
                qtrace = (_queue_trace(ev, port) if not alone and draw <= QUEUE_TRACE_DRAWS
                          else None)
                del ev
        flows = _parse_fct(d / "fct.txt", frame)
        sport = reference_ports(flows.src, flows.dst, flows.start_s, flows.flow, draw)[0]
        flows["path"] = [paths.get((int(s), int(t), int(k)), "") for s, t, k in
                         zip(flows.src, flows.dst, sport)]
        pauses = _parse_pfc(d / "pfc.txt", port)
        queues = _parse_qlen(d / "qlen.txt", port)
        drops = _parse_drops(out, inport)
    tag = {"case": name, "draw": draw, "run": "alone" if alone else "all"}
    return {"flows": flows.assign(**tag), "cnps": cnps.assign(**tag),
            "pauses": pauses.assign(**tag),
            "queues": queues.assign(**tag), "drops": drops.assign(**tag),
            "queue_trace": qtrace.assign(**tag) if qtrace is not None else qtrace,
            "wall": {**tag, "wall_s": wall}}


_TRACE = np.dtype({"names": ["time", "node", "intf", "qidx", "qlen", "sip", "dip", "l3",
                              "event", "node_type", "sport", "dport", "flags"],
                    "formats": ["<u8", "<u2", "u1", "u1", "<u4", "<u4", "<u4", "u1", "u1", "u1",
                                "<u2", "<u2", "<u2"],
                    "offsets": [0, 8, 10, 11, 12, 16, 20, 26, 27, 29, 32, 34, 36],
                    "itemsize": 56})
"""`third`'s TraceFormat record (trace-format.h, x86-64 layout: 56 bytes; qlen, the egress
queue's bytes at the event, at 12; a data packet's or ACK's source and destination ports at 32
and 34; an ACK's flags at 36, bit 0 its CNP)."""
ACK_L3 = 0xFC
"""IP protocol number `third` gives acknowledgements (CustomHeader: 0xFC ACK, 0x11 data)."""
DEQUEUE = 2
"""TraceFormat's event of a packet leaving an egress queue (0 receive, 1 enqueue, 3 drop)."""
QUEUE_TRACE_US = 10
"""Grid of the stored queue traces (the fluid samples its queues as often)."""


def _read_trace(path: Path, per_ns: int = 1) -> pd.DataFrame:
    """The switches' packet events of a traced run (enqueue, dequeue, drop), times in ns
    (``per_ns``: the trace's time units per ns)."""
    raw = path.read_bytes()
    n_ports = int(np.frombuffer(raw[:4], "<u4")[0])
    head = 4 + n_ports * 11 + 4                       # SimSetting: ports, (u16, u8, u64), win
    if (len(raw) - head) % _TRACE.itemsize:
        raise RuntimeError(f"{path}: not a whole number of trace records")
    ev = pd.DataFrame(np.frombuffer(raw[head:], _TRACE))
    if per_ns != 1:
        ev["time"] = ev.time // per_ns
    return ev[ev.node_type == 1]


def _queue_trace(ev: pd.DataFrame, port: dict) -> pd.DataFrame:
    """Each switch egress queue's bytes every QUEUE_TRACE_US after the flows start (the length
    its last enqueue or dequeue left, all priorities), for the queues that reach 1 KB; the
    samples that hold bytes (the rest are empty)."""
    ev = ev[ev.event.isin((1, 2))].sort_values("time", kind="stable")
    rows = []
    for (node, intf), g in ev.groupby(["node", "intf"]):
        # one queue per priority (data and ACKs share one here: ACK_HIGH_PRIO 0)
        if g.groupby("qidx").qlen.max().sum() < 1000:
            continue
        g = g.reset_index(drop=True)                                     # in time order
        t = (g.time.to_numpy(np.int64) - int(T0_S * 1e9)) / 1e3          # us
        level = g.pivot(columns="qidx", values="qlen").ffill().fillna(0)
        total = level.sum(axis=1).to_numpy()
        grid = np.arange(0, int(t.max()) + QUEUE_TRACE_US, QUEUE_TRACE_US)
        at = np.searchsorted(t, grid, side="right") - 1
        val = np.where(at >= 0, total[np.maximum(at, 0)], 0.0)
        keep = val > 0
        rows.append(pd.DataFrame({"link": port[(int(node), int(intf))], "t_us": grid[keep],
                                  "queue_bytes": val[keep].astype(np.int64)}))
    cols = ["link", "t_us", "queue_bytes"]
    return pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)


def _parse_cnps(ev: pd.DataFrame, frame: pd.DataFrame, draw: int, port: dict,
                fabric) -> pd.DataFrame:
    """Per flow, when its CNPs reached the sender: the ACKs flagged CNP (the receiver echoes a
    marked packet, HPCC ns-3 ``ReceiveUdp``) as they leave the last switch for the sender's
    NIC, plus that cable's propagation. Columns: flow, first_cnp_ns (after the flows start;
    empty: none), cnps (how many ACKs carried one)."""
    sport, dport = reference_ports(frame.src_gpu, frame.dst_gpu, frame.start_s, frame.flow,
                                   draw)
    lat_ns = pd.Series(fabric.latency * 1e9, index=fabric.link_names())
    to_nic = pd.Series({k: lat_ns[n] for k, n in port.items()
                        if n.split("->")[1].startswith("nic")})
    ack = ev[(ev.l3 == ACK_L3) & (ev.event == DEQUEUE) & ((ev["flags"] & 1) == 1)]
    cable = to_nic.reindex(pd.MultiIndex.from_arrays([ack.node, ack.intf])).to_numpy()
    # an ACK returns the data's ports swapped: its source port is the flow's destination's
    acks = pd.DataFrame({"src_gpu": (ack.dip.to_numpy() >> 8) & 0xFFFF,
                         "dst_gpu": (ack.sip.to_numpy() >> 8) & 0xFFFF,
                         "sport": ack.dport.to_numpy(), "dport": ack.sport.to_numpy(),
                         "t_ns": ack.time.to_numpy() + cable})[~np.isnan(cable)]
    flows = pd.DataFrame({"flow": frame.flow.to_numpy(), "src_gpu": frame.src_gpu.to_numpy(),
                          "dst_gpu": frame.dst_gpu.to_numpy(), "sport": sport, "dport": dport,
                          "t0_ns": (T0_S + frame.start_s.to_numpy()) * 1e9})
    got = flows.merge(acks, on=["src_gpu", "dst_gpu", "sport", "dport"], how="left")
    got["t_ns"] -= got.t0_ns
    per = got.groupby("flow", sort=False).t_ns
    return pd.DataFrame({"flow": flows.flow.astype(int),
                         "first_cnp_ns": per.min().round().reindex(flows.flow).to_numpy(),
                         "cnps": per.count().reindex(flows.flow).to_numpy()}).astype(
        {"first_cnp_ns": "Int64"})


def _parse_paths(ev: pd.DataFrame, port: dict) -> dict:
    """(src, dst, sport) -> the switch egress links its data packets were queued at, in order
    (ECMP hashes the 5-tuple, so every packet of a flow takes one path)."""
    ev = ev[(ev.event == 1) & (ev.l3 == 0x11)]
    ev = ev.drop_duplicates(["sip", "dip", "sport", "node", "intf"]).sort_values("time",
                                                                               kind="stable")
    out = {}
    for (sip, dip, sport), g in ev.groupby(["sip", "dip", "sport"], sort=False):
        out[((int(sip) >> 8) & 0xFFFF, (int(dip) >> 8) & 0xFFFF, int(sport))] = " ".join(
            port[(int(a), int(b))] for a, b in zip(g.node, g.intf))
    return out


def _ip_node(ip_hex: str) -> int:
    return (int(ip_hex, 16) >> 8) & 0xFFFF


def _parse_fct(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    cols = ["sip", "dip", "sport", "dport", "size", "start_ns", "fct_ns", "standalone_fct_ns"]
    out = pd.read_csv(path, sep=" ", names=cols, dtype={"sip": str, "dip": str})
    out["src"] = out.sip.map(_ip_node)
    out["dst"] = out.dip.map(_ip_node)
    f = frame.assign(sport=reference_ports(frame.src_gpu, frame.dst_gpu, frame.start_s,
                                           frame.flow, 0)[0])
    m = f.merge(out, left_on=["src_gpu", "dst_gpu", "sport"], right_on=["src", "dst", "sport"],
                how="left", validate="one_to_one")
    if m.fct_ns.isna().any():
        raise RuntimeError(f"{path}: {int(m.fct_ns.isna().sum())} flows did not finish "
                           f"(flows {m.flow[m.fct_ns.isna()].tolist()})")
    return m[["flow", "src_gpu", "dst_gpu", "bytes", "start_s", "role", "fct_ns",
              "standalone_fct_ns"]].sort_values("flow").rename(
        columns={"src_gpu": "src", "dst_gpu": "dst", "bytes": "size_bytes"})


def _parse_pfc(path: Path, port: dict) -> pd.DataFrame:
    """PAUSE count and paused ns per paused egress (the device that received the frames)."""
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=["link", "pauses", "paused_ns"])
    ev = pd.read_csv(path, sep=" ", names=["t_ns", "node", "node_type", "ifindex", "pause"])
    rows = []
    for (node, ifx), g in ev.groupby(["node", "ifindex"]):
        since, n, total = None, 0, 0
        for t, p in zip(g.t_ns, g.pause):
            if p and since is None:
                since, n = t, n + 1
            elif not p and since is not None:
                total, since = total + t - since, None
        if since is not None:
            total += g.t_ns.max() - since
        rows.append({"link": port[(int(node), int(ifx))], "pauses": n, "paused_ns": total})
    return pd.DataFrame(rows)


def _parse_drops(stdout: str, inport: dict) -> pd.DataFrame:
    """Packets the switches dropped, per ingress link: `third`'s switch MMU prints a line
    "<ns> <node> Drop: queue:<port>,<priority>: ..." for every packet its ingress admission
    refuses (lossy: PAUSE frames unheeded, the port's headroom full)."""
    cnt = {}
    for line in stdout.splitlines():
        if " Drop: queue:" in line:
            head, rest = line.split(" Drop: queue:", 1)
            node, ifx = int(head.split()[1]), int(rest.split(",", 1)[0])
            cnt[inport[(node, ifx)]] = cnt.get(inport[(node, ifx)], 0) + 1
    return pd.DataFrame({"link": list(cnt), "dropped_packets": list(cnt.values())},
                        columns=["link", "dropped_packets"])


def _parse_qlen(path: Path, port: dict) -> pd.DataFrame:
    """Peak and mean egress queue per switch port from `third`'s histograms (1 KB buckets
    sampled every 100 ns over QLEN_MON_START .. END); ports that never queued are left out."""
    rows, block = [], None
    for line in path.read_text().splitlines():
        if line.startswith("time:"):
            block = []
            rows.append(block)
            continue
        node, ifx, *cnt = (int(x) for x in line.split())
        block.append((node, ifx, np.array(cnt, float)))
    out = []
    for node, ifx, cnt in (rows[-1] if rows else []):
        if len(cnt) <= 1:
            continue
        busy = cnt[1:].sum()
        out.append({"link": port[(node, ifx)], "max_queue_bytes": (len(cnt) - 1) * 1000.0,
                    "samples_over_1kb": busy})
    return pd.DataFrame(out, columns=["link", "max_queue_bytes", "samples_over_1kb"]) \
        if out else pd.DataFrame(columns=["link", "max_queue_bytes", "samples_over_1kb"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns3", required=True, help="the HPCC repository's simulation/ directory")
    ap.add_argument("--cases", default=None,
                    help="comma-separated (default: every case of the suite, or of the "
                         "held-out set with --held-out)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=None,
                    help="validation/ns3_suite (ns3_suite_exact with --exact)")
    ap.add_argument("--jitter", action="store_true",
                    help="only the start-jitter runs of JITTER_CASES (of HELD_OUT_JITTER_CASES "
                         "with --held-out; jitter.csv)")
    ap.add_argument("--exact", action="store_true",
                    help="scratch/third_exact: picosecond resolution, exact serialization")
    ap.add_argument("--only", default=None,
                    help="comma-separated outputs to write (default: all of OUTPUTS)")
    ap.add_argument("--no-alone", action="store_true",
                    help="only the runs with every flow (not the victims' runs alone)")
    ap.add_argument("--held-out", action="store_true",
                    help="the held-out cases (ns3_suite.HELD_OUT) at exact serialization, "
                         "into validation/ns3_held_out")
    a = ap.parse_args()
    a.exact = a.exact or a.held_out
    known = HELD_OUT if a.held_out else CASES
    a.cases = a.cases or ",".join(known)
    a.out = a.out or str(HELD_OUT_DIR if a.held_out else
                         EXACT_SUITE_DIR if a.exact else SUITE_DIR)
    program = Path(a.ns3) / "build" / "scratch" / PROGRAM[a.exact]
    if not program.is_file():
        ap.error(f"--ns3: no {program} (build the simulator as validation/"
                 f"{Path(a.out).name}/README.md says)")
    unknown = [n for n in a.cases.split(",") if n not in known]
    if unknown:
        ap.error(f"--cases: unknown {', '.join(unknown)} ({', '.join(known)})")
    bad = [k for k in (a.only or "").split(",") if a.only and k not in OUTPUTS]
    if bad:
        ap.error(f"--only: unknown {', '.join(bad)} ({', '.join(OUTPUTS)})")
    if a.jitter:
        jitter_runs(a)
        return
    jobs = [(n, d, alone) for n in a.cases.split(",") for d in ALL_CASES[n].draws
            for alone in ((False, True) if ALL_CASES[n].alone and not a.no_alone
                          else (False,))]
    with ProcessPoolExecutor(a.jobs) as pool:
        res = list(pool.map(run_one, [a.ns3] * len(jobs), *zip(*jobs), [0] * len(jobs),
                            [a.exact] * len(jobs)))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    done = {j[0] for j in jobs}
    first = ["case", "draw", "run"]
    for key in a.only.split(",") if a.only else OUTPUTS:
        parts = [pd.DataFrame([r["wall"] for r in res])] if key == "wall" else \
            [r[key] for r in res if r[key] is not None]
        path = out / f"{key}.csv"
        if path.exists():         # keep the cases not run now, in the suite's order
            kept = pd.read_csv(path)
            parts.insert(0, kept[~kept.case.isin(done)])
        # (every part empty: a header alone, in the runs' columns)
        frame = pd.concat([p for p in parts if len(p)] or parts[-1:], ignore_index=True)
        order = {n: i for i, n in enumerate(ALL_CASES)}
        frame = frame.sort_values(["case", "draw", "run"], key=lambda c: c.map(order)
                                  if c.name == "case" else c, kind="stable")
        frame[first + [c for c in frame.columns if c not in first]].to_csv(path, index=False)
    print(f"{len(jobs)} runs -> {out}")


def jitter_runs(a) -> None:
    """jitter.csv: every flow's FCT in each JITTERS run of JITTER_CASES (of
    HELD_OUT_JITTER_CASES with ``--held-out``), with the incast and without it
    (ns3_suite.jitter_table)."""
    cases = HELD_OUT_JITTER_CASES if a.held_out else JITTER_CASES
    jobs = [(n, k, alone) for n in cases for k in JITTERS for alone in (False, True)]
    with ProcessPoolExecutor(a.jobs) as pool:
        res = list(pool.map(run_one, [a.ns3] * len(jobs), [j[0] for j in jobs], [1] * len(jobs),
                            [j[2] for j in jobs], [j[1] for j in jobs], [a.exact] * len(jobs)))
    rows = [r["flows"].assign(jitter=k, start_s=r["flows"].start_s.round(9))[
        ["case", "jitter", "run", "flow", "role", "start_s", "fct_ns"]]
        for (_, k, _), r in zip(jobs, res)]
    path = Path(a.out) / "jitter.csv"
    pd.concat(rows, ignore_index=True).to_csv(path, index=False)
    print(f"{len(jobs)} runs -> {path}")


if __name__ == "__main__":
    main()
