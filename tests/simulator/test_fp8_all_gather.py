"""optimizations.fp8_all_gather: the gathered GEMM operands move one byte per element, the
reduce-scatters stay as they were, and the knob is refused without FP8 training."""

from __future__ import annotations

import pytest

from simulator import Scenario, ScenarioError, simulate
from simulator.config.resolve import resolve
from simulator.step.program import collective_requests
from tests.conftest import small_scenario
from workloads.params import layer_params

SEQ, MB, TP = 2048, 2, 2


def _scenario(zero: int, *overrides) -> Scenario:
    d = small_scenario(
        cluster={"gpu": "h100-sxm"},
        workload={"precision": "fp8", "seq_len": SEQ, "micro_batch": MB},
        parallel={"tp": TP, "pp": 1, "zero": zero, "sequence_parallel": True})
    return Scenario.from_dict(d, ["fidelity=screening", *overrides])


def _requests(sc: Scenario) -> dict[tuple[str, str], set[float]]:
    out: dict[tuple[str, str], set[float]] = {}
    for r in collective_requests(sc, resolve(sc)):
        out.setdefault((r.kind, r.group.role), set()).add(r.nbytes)
    return out


@pytest.mark.parametrize("zero", [1, 3])
def test_gathers_move_one_byte_per_element_and_reductions_do_not_change(zero):
    sc = _scenario(zero)
    h = sc.workload.model.hidden_size
    bf16 = _requests(sc)
    fp8 = _requests(_scenario(zero, "optimizations.fp8_all_gather=true"))
    # the sequence-parallel all-gather of one micro-batch's activations: s x b x h elements
    assert bf16[("all_gather", "tp")] == {2.0 * SEQ * MB * h}
    assert fp8[("all_gather", "tp")] == {1.0 * SEQ * MB * h}
    for key in bf16:
        if key[0] != "all_gather":
            assert fp8[key] == bf16[key], key
    gathers = [k for k in bf16 if k[0] == "all_gather" and k[1] != "tp"]
    assert gathers          # ZeRO-1's parameter gather, ZeRO-3's per-layer weight gathers
    for key in gathers:
        assert {b / 2 for b in bf16[key]} == fp8[key], key


def test_zero3_per_layer_gather_is_one_byte_per_parameter():
    sc = _scenario(3, "optimizations.fp8_all_gather=true")
    split = layer_params(sc.workload.model, False)
    per_gpu = split.tp_sharded / TP + split.replicated
    assert per_gpu in _requests(sc)[("all_gather", "zdp")]


def test_fp8_gathers_shorten_the_step():
    base = simulate(_scenario(3), frames=False).step_time_s
    assert simulate(_scenario(3, "optimizations.fp8_all_gather=true"),
                    frames=False).step_time_s < base


def test_refused_without_fp8_training():
    d = small_scenario(optimizations={"fp8_all_gather": True})
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(d)
    msg = str(e.value)
    assert "optimizations.fp8_all_gather" in msg and "\n" not in msg.strip()
