"""Megatron-Core's EP all-to-all overlap (one micro-batch's forward merged with another's
backward, layer by layer) as a two-stream schedule with its data dependencies, and the SMs
its all-to-all kernels take from the compute beside them."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.config.scenario import Scenario
from simulator.simulate import simulate
from simulator.step.compute import LayerCost
from simulator.step.program import merged_pair_exposed_s
from tests.conftest import small_scenario

MOE = {"model": {"name": "moe-16", "num_layers": 8, "hidden_size": 2048,
                 "num_attention_heads": 16, "vocab_size": 32000, "activation": "swiglu",
                 "num_experts": 16, "moe_top_k": 2, "moe_ffn_hidden_size": 1024},
       "seq_len": 4096, "global_batch": 64, "micro_batch": 1}


def _layer(a_f=0.0, e_f=0.0, e_bi=0.0, e_bw=0.0, a_b=0.0) -> LayerCost:
    """A layer whose attention side (pre-dispatch) and expert side (mlp) take these seconds."""
    return LayerCost(fwd_s=a_f + e_f, bwd_input_s=e_bi + a_b, bwd_weight_s=e_bw,
                     recompute_s=0.0, attn_fwd_s=0.0, tp_bytes=0.0, tp_collectives_fwd=0,
                     ep_bytes=1.0, cp_bytes=0.0, mlp_fwd_s=e_f, mlp_bwd_input_s=e_bi,
                     mlp_bwd_weight_s=e_bw)


def test_without_compute_every_all_to_all_is_exposed_and_without_traffic_none():
    assert merged_pair_exposed_s(_layer(), 2.0, 3.0) == pytest.approx(5.0)
    assert merged_pair_exposed_s(_layer(1, 1, 1, 1, 1), 0.0, 0.0) == 0.0


def test_the_forward_combine_waits_for_the_backward_dispatch():
    """Each all-to-all 1 s, attention 0.5 s each way, the experts' input gradient 2 s and
    their forward 0.5 s: 3.5 s of compute against 4 s of traffic, so hiding by totals would
    leave 0.5 s. In Megatron's order the backward's dispatch (1-2 s ... 3-4 s) cannot start
    before the experts' input gradient ends at 3 s, and the forward's combine waits for it:
    the pair ends at 5 s, 1.5 s exposed."""
    c = _layer(a_f=0.5, e_f=0.5, e_bi=2.0, a_b=0.5)
    assert merged_pair_exposed_s(c, 2.0, 2.0) == pytest.approx(1.5)


def test_without_delayed_wgrad_the_backward_dispatch_waits_for_the_weight_gradient_too():
    """No traffic but the backward's 1 s dispatch (its combine 1 s before it, the forward's
    none): the experts' input gradient 1 s, weight gradient 2 s, attention backward 0.5 s
    after the dispatch. Without --delay-wgrad-compute the dispatch starts after both, at
    1 + 1 + 2 = 4 s, and the attention backward after it: the combine's and the dispatch's
    2 s exposed. Delayed, the dispatch runs at 2-3 s beside the weight gradient (2-4 s): only
    the combine's 1 s is exposed."""
    c = _layer(e_bi=1.0, e_bw=2.0, a_b=0.5)
    assert merged_pair_exposed_s(c, 0.0, 2.0) == pytest.approx(2.0)
    assert merged_pair_exposed_s(c, 0.0, 2.0, delay_wgrad=True) == pytest.approx(1.0)


@pytest.mark.parametrize("rate", [1.0, 0.75, 0.5])
def test_the_all_to_alls_sms_cost_the_compute_beside_it_its_share(rate):
    """Attention forward 2 s beside the backward's 1 s combine: it runs at ``rate`` for that
    second, so ends at 3 - rate; the backward's 1 s dispatch follows, nothing beside it.
    Exposed: the dispatch plus (1 - rate) x the combine."""
    c = _layer(a_f=2.0)
    assert merged_pair_exposed_s(c, 0.0, 2.0, rate) == pytest.approx(1.0 + (1.0 - rate))


times = st.floats(0.0, 10.0)


@settings(max_examples=200, deadline=None)
@given(times, times, times, times, times, times, times, st.floats(0.2, 1.0))
def test_a_merged_pair_exposes_between_its_bounds(a_f, e_f, e_bi, e_bw, a_b, ep_f, ep_b, rate):
    """Never less than the traffic the pair's compute cannot cover (one communication stream:
    max(0, traffic - compute)); never more than running everything in turn with the compute
    at ``rate`` throughout, the weight gradient delayed or not; never less with fewer SMs for
    the compute."""
    c = _layer(a_f, e_f, e_bi, e_bw, a_b)
    compute, traffic = a_f + e_f + e_bi + e_bw + a_b, ep_f + ep_b
    exposed = merged_pair_exposed_s(c, ep_f, ep_b, rate)
    assert exposed >= max(0.0, traffic - compute) - 1e-9
    assert exposed <= traffic + compute * (1 / rate - 1) + 1e-9
    assert exposed >= merged_pair_exposed_s(c, ep_f, ep_b, 1.0) - 1e-9
    delayed = merged_pair_exposed_s(c, ep_f, ep_b, rate, delay_wgrad=True)
    assert max(0.0, traffic - compute) - 1e-9 <= delayed
    assert delayed <= traffic + compute * (1 / rate - 1) + 1e-9


def _step(ep_comm_sms, overlap=True, delay_wgrad=False):
    return simulate(Scenario.from_dict(small_scenario(
        workload=MOE, fidelity="screening",
        optimizations={"ep_overlap": overlap, "ep_comm_sms": ep_comm_sms,
                       "delay_wgrad": delay_wgrad},
        parallel={"tp": 1, "pp": 1, "ep": 8, "zero": 1, "sequence_parallel": False},
        cluster={"gpu": "h100-sxm", "gpus": 32, "gpus_per_node": 8})), frames=False)


def test_sms_held_by_the_all_to_all_show_as_exposed_ep_time_only_when_overlapped():
    few, many = _step(8), _step(64)
    assert many.breakdown_s["ep_comm"] > few.breakdown_s["ep_comm"]
    assert many.breakdown_s["forward_compute"] == few.breakdown_s["forward_compute"]
    alone = _step(8, overlap=False), _step(64, overlap=False)
    assert alone[0].step_time_s == alone[1].step_time_s


def test_ep_comm_sms_must_leave_compute_some_sms():
    with pytest.raises(ValueError, match="ep_comm_sms") as err:
        _step(132)
    assert "\n" not in str(err.value)


def test_delayed_wgrad_without_the_overlap_is_a_one_line_error():
    """Megatron-Core's rule: delay_wgrad_compute only with overlap_moe_expert_parallel_comm."""
    from simulator import ScenarioError
    with pytest.raises(ScenarioError) as err:
        _step(8, overlap=False, delay_wgrad=True)
    msg = str(err.value)
    assert "optimizations.delay_wgrad" in msg and "ep_overlap" in msg and "\n" not in msg
