"""Every plot renders from a small result, with labelled axes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from simulator import Scenario, plots, simulate  # noqa: E402
from simulator.network.build import build_fabric_for  # noqa: E402
from simulator.network.flowfile import flows_per_link  # noqa: E402
from tests.conftest import small_scenario  # noqa: E402

FABRIC = {"kind": "spine-leaf", "hosts_per_leaf": 8, "spines": 4, "nic_gbps": 400}


@pytest.fixture(scope="module")
def result():
    return simulate(Scenario.from_dict(small_scenario(
        cluster={"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8, "topology": FABRIC},
        fidelity="flow", network={"congestion_control": "none"})))


def _check(fig, tmp_path, name):
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    for ax in axes:                        # shared x axes carry the label on the bottom one
        assert (ax.get_xlabel() or ax.get_shared_x_axes().get_siblings(ax) != [ax]) and \
            (ax.get_ylabel() or ax.get_yticklabels())
    assert any(ax.get_xlabel() for ax in axes)
    fig.savefig(tmp_path / f"{name}.png", dpi=60)
    assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_timeline_and_breakdown(result, tmp_path):
    _check(result.plot_timeline(), tmp_path, "timeline")
    _check(plots.breakdown(pd.DataFrame([result.breakdown_s, result.breakdown_s],
                                        index=["a", "b"])), tmp_path, "breakdown")


def test_links_and_ecmp(result, tmp_path):
    assert len(result.links)
    _check(plots.link_utilisation(result.links), tmp_path, "links")
    fabric = build_fabric_for(Scenario.from_dict(small_scenario(
        cluster={"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8, "topology": FABRIC})))
    src = np.arange(64)
    load = flows_per_link(fabric, src, (src + 8) % 64)
    assert load.flows.sum() > 0 and (load.flows[load.tier == "leaf-spine"] == 0).any()
    _check(plots.ecmp_load(load), tmp_path, "ecmp")


def test_mfu_heatmap(tmp_path):
    sweep = pd.DataFrame({"tp": [1, 1, 2, 2, 2], "pp": [1, 2, 1, 2, 2],
                          "mfu": [0.3, 0.4, 0.5, 0.45, 0.2],
                          "status": ["ok", "ok", "ok", "ok", "oom"]})
    _check(plots.mfu_heatmap(sweep), tmp_path, "heat")


def test_ettr_vs_interval(tmp_path):
    from simulator.failures import ettr_vs_interval
    sc = Scenario.from_dict(small_scenario())
    table = ettr_vs_interval(sc, intervals_min=(5, 30, 120), days=3, trials=20)
    assert set(table.strategy) == {"sync", "two-stage", "in-memory"}
    _check(plots.ettr_vs_interval(table), tmp_path, "ettr")


def test_queue_depth_and_pauses(tmp_path):
    from validation.ns3 import network, run, star
    f = star(9, buffer_mib=1)
    _, pfc = run(f, np.arange(8), 8, 2e6, network(congestion_control="none"), buffer_mib=1)
    _, dcqcn = run(f, np.arange(8), 8, 2e6, network(), buffer_mib=1)
    assert len(pfc.attrs["queue_trace"]) and len(pfc.attrs["pause_trace"])
    _check(plots.queue_depth({"PFC only": pfc, "DCQCN + PFC": dcqcn}), tmp_path, "queue")
