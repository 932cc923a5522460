"""The DCQCN / PFC fluid model inside a training step: component shapes simulated once, jumps
over steady operating points, and the step's queue / pause / mark columns and trace counters."""

from __future__ import annotations

import json

import numpy as np
import pytest

import simulator.congestion.fluid as fluid
from simulator import Scenario, simulate
from simulator.config.topology import topology_spec
from simulator.congestion.fluid import FLUID_STEP_S, simulate_fluid
from simulator.congestion.shapes import FORM_FIFO, FORM_STEP_S, simulate_fluid_components
from simulator.network.build import make_fabric
from simulator.network.collectives import effective_capacity, lower
from simulator.network.fabric import switch_buffers, switch_ids
from simulator.result import CONGESTION_LINK_COLUMNS, QUEUE_COLUMNS
from topologies.gpus import load_gpu
from validation.ns3 import network, star

SELENE = "examples/gpt3-175b-1024-selene.yaml"


def _collision_phase():
    """A ring over 64 GPUs of an 8-leaf fabric whose uplinks ECMP makes collide."""
    f = make_fabric(topology_spec("{kind: spine-leaf, hosts_per_leaf: 8, spines: 4, "
                                  "nic_gbps: 400}"), gpus=64, gpus_per_node=8,
                    gpu=load_gpu("h100-sxm"))
    ph = lower("all_gather", [np.arange(64)], 64 * 2**20, gpus_per_node=8)[0]
    hops, parent, share = f.route(ph.src, ph.dst, ph.group, "ecmp")
    cap = effective_capacity(f)
    src, dst, _ = switch_ids(f)
    args = (hops, ph.nbytes[parent] * share, cap, np.zeros(f.num_links) + f.latency, src, dst,
            switch_buffers(f))
    return args, share


def test_component_shapes_reproduce_the_joint_simulation_without_randomness():
    """PFC only (no DCQCN, so no random marks): simulating one component per shape and copying
    it gives the joint simulation's finish times and link bytes. Queues differ where the
    joint run's shared buffers couple components (the stated approximation): the deepest
    queue within 1.5x, the queue integral within 10 %."""
    args, share = _collision_phase()
    cfg = network(congestion_control="none", mtu_bytes=4096, header_bytes=62)
    joint = simulate_fluid(*args, cfg, line_share=share, dt=FORM_STEP_S)
    cache = {}
    split = simulate_fluid_components(*args, cfg, line_share=share, cache=cache)
    assert 0 < len(cache) < len(share)                    # some shapes, fewer than flows
    assert np.allclose(split.finish_s, joint.finish_s, rtol=1e-9)
    assert np.allclose(split.link_bytes, joint.link_bytes, rtol=1e-9, atol=1e-3)
    assert 1 / 1.5 < split.link_max_queue.max() / joint.link_max_queue.max() < 1.5
    assert split.link_queue_byte_s.sum() == pytest.approx(joint.link_queue_byte_s.sum(), rel=0.1)
    assert split.link_bytes.sum() == pytest.approx(joint.link_bytes.sum(), rel=1e-9)


def test_component_shapes_under_dcqcn_stay_close_to_the_joint_simulation():
    """Mean completion time within 3 % over three seeds. The last completion is looser
    (15 %): the joint run draws every component's marks, the split copies one draw per shape,
    so its maximum is over fewer samples (about 6 % earlier here)."""
    args, share = _collision_phase()
    cfg = network(mtu_bytes=4096, header_bytes=62)
    got = []
    for seed in range(3):
        joint = simulate_fluid(*args, cfg, line_share=share, dt=FORM_STEP_S, seed=seed)
        split = simulate_fluid_components(*args, cfg, line_share=share, seed=seed)
        assert split.link_bytes.sum() == pytest.approx(joint.link_bytes.sum(), rel=1e-9)
        got.append([np.nanmean(split.finish_s), np.nanmean(joint.finish_s),
                    np.nanmax(split.finish_s), np.nanmax(joint.finish_s)])
    split_mean, joint_mean, split_max, joint_max = np.mean(got, axis=0)
    assert split_mean == pytest.approx(joint_mean, rel=0.03)
    assert split_max == pytest.approx(joint_max, rel=0.15)


def _long_collision_phase(gib=2):
    """A ring all-gather of ``gib`` GiB on the 8-leaf fabric, one channel per NIC: ECMP
    collisions hold DCQCN queues (~10 ms at 2 GiB), with completions spread over
    milliseconds."""
    f = make_fabric(topology_spec("{kind: spine-leaf, hosts_per_leaf: 8, spines: 4, "
                                  "nic_gbps: 400}"), gpus=64, gpus_per_node=8,
                    gpu=load_gpu("h100-sxm"))
    ph = lower("all_gather", [np.arange(64)], gib * 2**30, gpus_per_node=8,
               channels_per_nic=1)[0]
    hops, parent, share = f.route(ph.src, ph.dst, ph.group, "ecmp")
    src, dst, _ = switch_ids(f)
    args = (hops, ph.nbytes[parent] * share, effective_capacity(f),
            np.zeros(f.num_links) + f.latency, src, dst, switch_buffers(f),
            network(mtu_bytes=4096, header_bytes=62))
    return args, share


def _mean_and_last(args, share, seeds=range(3), **kw):
    runs = [simulate_fluid(*args, line_share=share, seed=seed, fifo=FORM_FIFO, **kw)
            for seed in seeds]
    return (np.mean([[np.nanmean(r.finish_s), np.nanmax(r.finish_s)] for r in runs], axis=0),
            sum(r.steady_jumps for r in runs))


def test_the_shapes_integration_step_agrees_with_the_fluids_own():
    """Convergence of the step the collective shapes run at (FORM_STEP_S, 2 us) against the
    fluid's own (FLUID_STEP_S, 0.25 us), under DCQCN: the mean completion time within 0.5 %,
    the last one (a seed-to-seed spread of about 1 %) within 2 %, each averaged over six
    seeds (0.02 % and 0.3 %; at 1 us the last completion read 1.3 % early)."""
    args, share = _long_collision_phase()
    fine, _ = _mean_and_last(args, share, seeds=range(6), dt=FLUID_STEP_S, jumps=True)
    coarse, _ = _mean_and_last(args, share, seeds=range(6), dt=FORM_STEP_S, jumps=True)
    assert coarse[0] == pytest.approx(fine[0], rel=0.005)
    assert coarse[1] == pytest.approx(fine[1], rel=0.02)


def test_jumps_over_dcqcn_operating_points_agree_with_stepping():
    """Sampled DCQCN: the random cuts make single windows noisy, yet the operating points are
    found and jumped over; mean and last completion times agree with stepping every step
    within 1 % and 2 % (three seeds; 8 GiB, ~40 ms, so that operating points outlast the
    start-up)."""
    args, share = _long_collision_phase(8)
    stepped, none = _mean_and_last(args, share, dt=FORM_STEP_S)
    jumped, n_jumps = _mean_and_last(args, share, dt=FORM_STEP_S, jumps=True)
    assert none == 0 and n_jumps > 0
    assert jumped[0] == pytest.approx(stepped[0], rel=0.01)
    assert jumped[1] == pytest.approx(stepped[1], rel=0.02)


def test_jumping_over_steady_operating_points_stays_within_its_stated_bound():
    """A long 8 -> 1 incast under PFC alone (queue at the pause threshold, senders paused and
    resumed): jumps extrapolating the settled averages against stepping every microsecond;
    completion times agree within twice the operating-point tolerance, bytes exactly."""
    n = 8
    f = star(n + 1, buffer_mib=32)
    hops, _, _ = f.route(np.arange(n), np.full(n, n), np.arange(n), "ecmp")
    src, dst, _ = switch_ids(f)
    cfg = network(congestion_control="none")
    size = np.full(n, 12e6)
    args = (hops, size, f.capacity, f.latency, src, dst, switch_buffers(f, 32), cfg)
    jumped = simulate_fluid(*args, jumps=True)
    stepped = simulate_fluid(*args)
    assert jumped.steady_jumps > 0 and stepped.steady_jumps == 0
    assert np.allclose(jumped.finish_s, stepped.finish_s, rtol=2 * fluid.STEADY_TOL)
    assert jumped.link_bytes.sum() == pytest.approx(stepped.link_bytes.sum(), rel=1e-9)


def test_a_step_under_dcqcn_reports_queues_pauses_and_marks_and_never_beats_max_min(tmp_path):
    # 32 GPUs on a 2-uplink leaf-spine fabric: ECMP collides pipeline and data-parallel flows
    over = ["fidelity=flow", "cluster.gpus=32", "workload.global_batch=16", "parallel.pp=2",
            "parallel.vpp=1", "parallel.schedule=1f1b", "workload.model=megatron-gpt-1.7b",
            "cluster.topology={kind: spine-leaf, hosts_per_leaf: 2, spines: 2, nic_gbps: 200}"]
    ideal = simulate(Scenario.load(SELENE, over + ["network.congestion_control=none"]))
    dc = simulate(Scenario.load(SELENE, over + ["network.congestion_control=dcqcn"]))
    assert list(ideal.links.columns[-len(CONGESTION_LINK_COLUMNS):]) == CONGESTION_LINK_COLUMNS
    assert ideal.links[CONGESTION_LINK_COLUMNS].isna().all().all() and ideal.queues.empty
    assert not dc.links[CONGESTION_LINK_COLUMNS].isna().any().any()
    assert dc.step_time_s >= ideal.step_time_s * (1 - 1e-9)
    assert (dc.links.ecn_mark_rate.between(0, 1)).all() and (dc.links.pause_s >= 0).all()
    assert list(dc.queues.columns) == QUEUE_COLUMNS
    assert dc.links.bytes.sum() == pytest.approx(ideal.links.bytes.sum(), rel=1e-6)
    assert dc.links.max_queue_bytes.max() > 0 and dc.links.ecn_mark_rate.max() > 0
    assert len(dc.queues) and dc.queues.t_s.between(0, dc.step_time_s).all()
    path = tmp_path / "trace.json"
    dc.to_chrome_trace(path)
    counters = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "C"]
    assert len(counters) == len(dc.queues)


def test_quiet_flows_at_line_rate_agree_with_the_fluid_model():
    """Flows of components no switch port can oversubscribe, with their host links fitting
    their line rates, take the closed form (size / line rate + path latency); the fluid model
    gives the same within its integration step, and the same bytes on every link."""
    from simulator.congestion.shapes import _at_line_rate, _split

    f = make_fabric(topology_spec("{kind: spine-leaf, hosts_per_leaf: 2, spines: 4, "
                                  "nic_gbps: 400}"), gpus=64, gpus_per_node=8,
                    gpu=load_gpu("h100-sxm"))
    cfg = network(mtu_bytes=4096, header_bytes=62)
    cap = effective_capacity(f) / (cfg.mtu_bytes / (cfg.mtu_bytes + cfg.header_bytes))
    src, dst, _ = switch_ids(f)
    lat, buf = np.zeros(f.num_links) + f.latency, switch_buffers(f)
    # pipeline sends between one GPU of each of four servers and another server (some across
    # spines), sizes 16-64 MiB
    ph = lower("p2p", [np.array([i, i + 32]) for i in range(0, 32, 8)], 64 * 2**20,
               gpus_per_node=8)[0]
    hops, parent, share = f.route(ph.src, ph.dst, ph.group, "ecmp")
    size = ph.nbytes[parent] * share * np.array([1.0, 0.25, 0.5, 0.75])[parent % 4]
    assert not _split(hops, size, cap, lat, src, dst, buf, cfg, share).congested.any()
    closed = _at_line_rate(hops, size, cap, lat, src, share, cfg)
    fluid_run = simulate_fluid(hops, size, cap, lat, src, dst, buf, cfg, line_share=share,
                               jumps=True, fifo=False, dt=FORM_STEP_S)
    assert closed is not None and fluid_run.link_max_queue.max() == 0
    assert len(np.unique(np.round(closed.finish_s, 9))) >= 4
    assert np.abs(closed.finish_s - fluid_run.finish_s).max() <= FORM_STEP_S
    assert np.allclose(closed.link_bytes, fluid_run.link_bytes, rtol=1e-9, atol=1e-3)
    # the same flows twice over: their host links are shared beyond capacity, no closed form
    assert _at_line_rate(np.concatenate([hops, hops]), np.concatenate([size, size]), cap, lat,
                         src, np.concatenate([share, share]), cfg) is None


def test_shapes_run_ahead_in_worker_processes_give_the_same_step(monkeypatch):
    """The step's shapes started ahead in forked workers (and stolen back by the compile when
    no worker has started them) give the step the same numbers as running each where it is
    needed."""
    import simulator.congestion.shapes as fc

    over = ["fidelity=flow", "cluster.gpus=32", "workload.global_batch=16", "parallel.pp=2",
            "parallel.vpp=1", "parallel.schedule=1f1b", "workload.model=megatron-gpt-1.7b",
            "cluster.topology={kind: spine-leaf, hosts_per_leaf: 2, spines: 2, nic_gbps: 200}",
            "network.congestion_control=dcqcn"]
    here = simulate(Scenario.load(SELENE, over))
    assert here.fidelity == "fluid"               # the result says the congestion model ran
    ideal = simulate(Scenario.load(SELENE, over + ["network.congestion_control=none"]))
    assert ideal.fidelity == "flow" and ideal.links.pause_s.isna().all()
    submitted = []
    submit = fc.FormPool.submit
    monkeypatch.setattr(fc.FormPool, "submit", lambda self, job: submitted.append(1) or
                        submit(self, job))
    monkeypatch.setattr(fc, "FORK_MIN_FLOW_STEPS", 0.0)
    monkeypatch.setattr(fc, "FORM_WORKERS", 2)
    ahead = simulate(Scenario.load(SELENE, over))
    assert submitted                          # the workers got shapes
    assert ahead.step_time_s == here.step_time_s
    cols = ["bytes", *CONGESTION_LINK_COLUMNS]
    assert np.array_equal(ahead.links[cols].to_numpy(), here.links[cols].to_numpy(),
                          equal_nan=True)
    assert ahead.queues.equals(here.queues)


def test_a_failure_while_shapes_run_ahead_stops_the_workers(monkeypatch):
    """An error after the workers started (here: routing the second batch) reaches the caller
    and stops the step's workers without waiting for their shapes."""
    import simulator.congestion.shapes as fc
    import simulator.network.comm as fcomm

    monkeypatch.setattr(fc, "FORK_MIN_FLOW_STEPS", 0.0)
    monkeypatch.setattr(fc, "FORM_WORKERS", 2)
    closed = []
    close = fc.FormPool.close
    monkeypatch.setattr(fc.FormPool, "close", lambda self, wait=True: closed.append(wait) or
                        close(self, wait))
    route = fcomm.route_phases
    calls = []

    def failing(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("routing failed")
        return route(*a, **k)

    monkeypatch.setattr(fcomm, "route_phases", failing)
    over = ["fidelity=flow", "cluster.gpus=32", "workload.global_batch=16", "parallel.pp=2",
            "parallel.vpp=1", "parallel.schedule=1f1b", "workload.model=megatron-gpt-1.7b",
            "cluster.topology={kind: spine-leaf, hosts_per_leaf: 2, spines: 2, nic_gbps: 200}",
            "network.congestion_control=dcqcn"]
    with pytest.raises(RuntimeError, match="routing failed"):
        simulate(Scenario.load(SELENE, over))
    assert closed == [False]


def test_nccl_tests_report_queues_marks_and_drops_only_under_the_fluid_model():
    from simulator.network.nccl_tests import nccl_tests

    kw = dict(gpus=64, topology="{kind: spine-leaf, hosts_per_leaf: 8, spines: 4, "
              "nic_gbps: 400}", min_bytes=64 * 2**20, max_bytes=64 * 2**20)
    ideal = nccl_tests("all_reduce", **kw)
    lossy = nccl_tests("all_reduce", net=network(pfc=False, mtu_bytes=4096, header_bytes=62),
                       **kw)
    assert "max_queue_bytes" not in ideal
    assert {"max_queue_bytes", "pause_s", "marked_bytes", "dropped_bytes"} <= set(lossy)
    assert lossy.max_queue_bytes.iloc[0] > 0 and lossy.pause_s.iloc[0] == 0
    assert lossy.busbw_gbyte_per_s.iloc[0] <= ideal.busbw_gbyte_per_s.iloc[0] * 1.01
