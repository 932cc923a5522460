"""Published MoE steps of newer Megatron-Bridge releases, with and without EP all-to-all
overlap (validation/moe_runs/runs.csv, not in ../shared): an out-of-sample check of the MoE
step and of the overlap model. One constant is fitted on them, with the other Megatron-Core
MoE runs: the host's per-expert issue time (validation/host_fit.py).

Each run is a row of ../shared/validation/public_runs.csv with the same model (its
architecture, fabric and the rules of :mod:`validation.public_runs`, :data:`MODEL_ROWS`) and
the run's own layout, batch, precision, dispatcher, SMs, overlap and delayed weight gradient;
the routing is force-balanced as the runs state."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulator.config.scenario import Scenario
from simulator.simulate import simulate
from validation import public_runs

RUNS = Path(__file__).parent / "moe_runs" / "runs.csv"
MODEL_ROWS = {"qwen3-30b-a3b": "mb2511-h100-qwen3-30b-16g",
              "qwen3-235b-a22b": "mb2511-b200-qwen3-235b-64g",
              "deepseek-v3": "mb2509-h100-dsv3-1024g"}
"""The public_runs.csv row whose model each run's model name takes."""


def scenario(run, rows: pd.DataFrame) -> Scenario:
    """The scenario of one run of runs.csv; ``rows``: public_runs.csv indexed by id."""
    d = public_runs.scenario_dict(rows.loc[MODEL_ROWS[run.model]])
    d["name"] = run.id
    d["workload"].update(precision=run.precision, fp8_recipe=run.fp8_recipe, seq_len=run.seq_len,
                         global_batch=run.global_batch, micro_batch=run.micro_batch,
                         moe={**d["workload"]["moe"], "imbalance": 0.0,
                              "dispatcher": run.dispatcher})
    same_pipeline = (run.pp, run.vpp) == (d["parallel"]["pp"], d["parallel"]["vpp"])
    d["parallel"].update(tp=run.tp, pp=run.pp, vpp=int(run.vpp), ep=run.ep,
                         sequence_parallel=run.tp > 1)
    if not same_pipeline:          # the row's stage layout belongs to its own pipeline; layers
        L = d["workload"]["model"]["num_layers"]      # that do not split take public_runs' rule
        uneven = run.pp > 1 and bool(L % (run.pp * run.vpp))
        d["parallel"].update(pipeline_layout=None,
                             account_for_embedding_in_pipeline_split=uneven,
                             account_for_loss_in_pipeline_split=uneven)
    sms = None if pd.isna(run.ep_comm_sms) else int(run.ep_comm_sms)
    graphs = [] if pd.isna(run.cuda_graph_scope) else str(run.cuda_graph_scope).split()
    d["optimizations"].update(ep_overlap=bool(run.ep_overlap),
                              delay_wgrad=bool(run.delay_wgrad), ep_comm_sms=sms,
                              cuda_graph_scope=graphs)
    d["cluster"].update(gpu=run.gpu, gpus=int(run.gpus))
    return Scenario.from_dict(d)


def evaluate(validation_dir: str | Path) -> pd.DataFrame:
    """Every run predicted. Columns: id, dispatcher, ep_overlap, delay_wgrad, published_s,
    predicted_s, error (predicted / published - 1), ep_comm_s (exposed EP time predicted)."""
    rows = pd.read_csv(Path(validation_dir) / "public_runs.csv").set_index("id", drop=False)
    out = []
    for run in pd.read_csv(RUNS).itertuples():
        res = simulate(scenario(run, rows), frames=False)
        out.append({"id": run.id, "dispatcher": run.dispatcher,
                    "ep_overlap": bool(run.ep_overlap), "delay_wgrad": bool(run.delay_wgrad),
                    "published_s": run.step_time_s,
                    "predicted_s": res.step_time_s,
                    "error": res.step_time_s / run.step_time_s - 1,
                    "ep_comm_s": float(res.breakdown_s["ep_comm"])})
    return pd.DataFrame(out)


def overlap_gains(table: pd.DataFrame) -> pd.DataFrame:
    """Step without overlap / step with it, published and predicted, for every run that has
    its no-overlap twin (the same id without ``-overlap``). Columns: id, published, predicted."""
    by_id = table.set_index("id")
    out = []
    for rid in table.id[table.ep_overlap]:
        base = rid.removesuffix("-overlap")
        if base != rid and base in by_id.index:
            off, on = by_id.loc[base], by_id.loc[rid]
            out.append({"id": rid, "published": off.published_s / on.published_s,
                        "predicted": off.predicted_s / on.predicted_s})
    return pd.DataFrame(out)
