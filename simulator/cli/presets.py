"""`clustersim presets`: the built-in models, GPUs and topologies."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from topologies import list_gpus, list_topologies, load_gpu, topology_mapping
from workloads import list_models, load_model
from workloads.params import count_params


def run(args, out: Console) -> int:
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
    for c in ("name", "BF16 TFLOP/s", "FP8 TFLOP/s", "HBM GiB", "HBM GB/s", "NVLink GB/s/dir",
              "NVLink GPUs"):
        t.add_column(c)
    for g in gpus:
        t.add_row(g.name, f"{g.bf16_tflops:g}", f"{g.fp8_tflops:g}" if g.fp8_tflops else "-",
                  f"{g.hbm_gib:g}", f"{g.hbm_gbyte_per_s:g}", f"{g.nvlink_gbyte_per_s:g}",
                  f"{g.nvlink_domain}")
    out.print(t)
    t = Table(title="Topologies")
    for c in ("name", "kind", "NIC Gb/s", "source"):
        t.add_column(c)
    for d in topos:
        t.add_row(d["name"], d["kind"], f"{d.get('nic_gbps', '')}", d.get("source", ""))
    out.print(t)
    return 0
