"""Dense pre-training rows of Megatron-Bridge's performance tables in public_runs.csv's columns.

    PYTHONPATH=. .venv/bin/python scripts/megatron_bridge_rows.py SUMMARY.md ARCHIVE.md \\
        --commit 067f987d --out validation/newer_runs/runs.csv

SUMMARY.md / ARCHIVE.md: ``docs/performance-summary.md`` and ``docs/performance-summary-archive.md``
of github.com/NVIDIA-NeMo/Megatron-Bridge at ``--commit``. Every "Pre-Training Performance" row
of a release after the newest one validation/ already holds (26.02) whose model is one of
:data:`MODELS`, on a system of :data:`SYSTEMS`, in a precision clustersim models
(:data:`PRECISIONS`; MoE rows only where :data:`MOE_SCOPE` says), becomes a row: the model
columns from the public_runs.csv (or gb200_runs) row of the same model, the layout, batch,
precision and throughput from the table, the step time GBS x sequence / (tokens / s / GPU x
GPUs). validation/newer_runs/README.md
says what each column takes.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = (ROOT.parent / "shared" / "validation" / "public_runs.csv",
             ROOT / "validation" / "gb200_runs" / "runs.csv")
MODELS = {"LLAMA3_8B": ("mb2511-gb200-llama3-8b-8g", "llama3-8b"),
          "LLAMA3_70B": ("mb2511-gb200-llama3-70b-64g", "llama3-70b"),
          "LLAMA3.1_405B": ("mb2511-gb200-llama31-405b-256g", "llama31-405b"),
          "Qwen3_30B_a3B": ("mb2511-h100-qwen3-30b-16g", "qwen3-30b"),
          "Qwen3_235B_a22B": ("mb2511-h100-qwen3-235b-256g", "qwen3-235b"),
          "DeepSeekV3": ("mb2511-b200-dsv3-256g", "dsv3")}
"""Table model -> (the row whose model columns it takes, its id's name)."""
_SYNC_FREE = (("26.06", "26.06.01", "26.08"), ("MXFP8",))
MOE_SCOPE = {("Qwen3_30B_a3B", "DGX-GB200"): _SYNC_FREE,
             ("Qwen3_30B_a3B", "DGX-GB300"): _SYNC_FREE,
             ("Qwen3_30B_a3B", "DGX-B300"): _SYNC_FREE,
             ("Qwen3_235B_a22B", "DGX-GB200"): _SYNC_FREE,
             ("Qwen3_235B_a22B", "DGX-GB300"): _SYNC_FREE,
             ("Qwen3_235B_a22B", "DGX-B300"): _SYNC_FREE,
             ("DeepSeekV3", "DGX-GB200"): _SYNC_FREE,
             ("DeepSeekV3", "DGX-GB300"): _SYNC_FREE,
             ("Qwen3_30B_a3B", "DGX-H100"): (("26.04", "26.04.01", "26.06"), ("FP8",))}
"""The MoE rows taken, (model, system) -> (releases, precisions): those whose recipe is traced
(validation.public_runs.RECIPE_SYNC_FREE: Megatron-Bridge pulls 4211, 3983 and 4226, Qwen3's
MXFP8 rows on Blackwell and DeepSeek-V3's on GB200 / GB300 from 26.06 on, DeepSeek-V3's B300
recipe having changed after 26.06's table, pull 4458; RECIPE_HYBRIDEP: Qwen3-30B's H100
recipe from pull 2477 on, which 26.02.01's table, printing the older PP 2 / EP 8 layout,
predates). The releases between 26.02 and 26.06 changed the other recipes' dispatchers and
overlap in steps not traced."""
MOE_NOTES = ("MoE: page states token distribution is force-balanced across experts, "
             "token-dropless.")
SYSTEMS = {"DGX-H100": ("h100-sxm", "DGX-H100 (NVLink4/NVSwitch); inter-node fabric not stated"),
           "DGX-GB200": ("gb200", "GB200 NVL72 (NVLink5 / NVLink Switch); inter-rack fabric "
                                  "not stated"),
           "DGX-GB300": ("gb300", "GB300 NVL72 (NVLink5 / NVLink Switch); inter-rack fabric "
                                  "not stated"),
           "DGX-B200": ("b200", "DGX-B200 (NVLink5/NVSwitch); inter-node fabric not stated"),
           "DGX-B300": ("b300", "DGX-B300 (NVLink5/NVSwitch); inter-node fabric not stated")}
PRECISIONS = {"FP8": "fp8 (FP8-CS)", "MXFP8": "fp8 (FP8-MX)", "BF16": "bf16"}
"""The tables' precisions clustersim models (FP8 is Transformer Engine's current scaling, as
26.02 writes the layouts 25.11 ran as FP8-CS); NVFP4 it does not."""
HELD = ("25.09", "25.11", "26.02")
"""Releases validation/ already holds (public_runs.csv, gb200_runs, gb300_runs)."""


def _sections(text: str):
    """(release, its pre-training text) of every "NN.NN[.NN] NeMo Container" section."""
    for sec in re.split(r"^## ", text, flags=re.M)[1:]:
        m = re.match(r"(\d\d\.\d\d(?:\.\d\d)?) NeMo Container", sec)
        if m:
            yield m.group(1), re.split(r"^### (?:SFT|LoRA)", sec, flags=re.M)[0]


def _tables(text: str):
    """(model, row as {column: cell}) of every "#### Model:" table."""
    for part in re.split(r"^#### Model: ", text, flags=re.M)[1:]:
        model = part.splitlines()[0].strip()
        lines = [ln for ln in part.splitlines() if ln.startswith("|")]
        head = [c.strip() for c in lines[0].strip("|").split("|")]
        for ln in lines[2:]:
            yield model, dict(zip(head, (c.strip() for c in ln.strip("|").split("|"))))


def _number(cell: str) -> float:
    return float(re.match(r"[\d.]+", cell).group(0))


def rows(files: list[tuple[Path, str]], commit: str) -> pd.DataFrame:
    """The rows of ``files`` ((path, its name in the repository))."""
    templates = pd.concat([pd.read_csv(f) for f in TEMPLATES]).set_index("id")
    out = []
    for path, name in files:
        for release, text in _sections(path.read_text()):
            if release in HELD:
                continue
            for model, c in _tables(text):
                if model not in MODELS or c["System"] not in SYSTEMS or \
                        c["Precision"] not in PRECISIONS:
                    continue
                moe = model.startswith(("Qwen3", "DeepSeek"))
                releases, precisions = MOE_SCOPE.get((model, c["System"]), ((), ()))
                if moe and (release not in releases or c["Precision"] not in precisions):
                    continue
                template, short = MODELS[model]
                gpu, interconnect = SYSTEMS[c["System"]]
                t = templates.loc[template].copy()
                gpus, gbs, seq = int(c["#-GPUs"]), int(c["GBS"]), int(c["Sequence Length"])
                tp, pp, cp = int(c["TP"]), int(c["PP"]), int(c["CP"])
                fsdp = int(c.get("FSDP", "0"))
                tok = _number(c["Tokens / sec / GPU"])
                t["source"] = ("NVIDIA NeMo Framework / Megatron-Bridge performance summary "
                               f"(container NeMo {release}, {c['System']})")
                t["source_location"] = (
                    f"github.com/NVIDIA-NeMo/Megatron-Bridge {name} (commit {commit}), section "
                    f"'{release} NeMo Container', table 'Model: {model}', system "
                    f"{c['System']} row {c['Precision']}" + (" (FSDP)" if fsdp else ""))
                t["framework"] = f"Megatron-Bridge / Megatron-Core (NeMo {release})"
                t["gpu"], t["gpus"], t["interconnect"] = gpu, gpus, interconnect
                t["seq_len"], t["global_batch_seqs"], t["micro_batch"] = seq, gbs, int(c["MBS"])
                t["tp"], t["pp"], t["cp"], t["vpp"] = tp, pp, cp, c["VP"]
                t["ep"] = int(c["EP"]) if moe else 1
                t["dp"] = gpus // (tp * pp * cp)
                t["zero_fsdp"] = ("FSDP (FSDP=1)" if fsdp else
                                  "DDP + distributed optimizer (FSDP=0)")
                t["precision"] = PRECISIONS[c["Precision"]]
                t["recompute"] = t["sequence_parallel"] = "unstated"
                t["reported_metric"] = "Tokens / sec / GPU"
                t["reported_value"] = t["tokens_per_s_per_gpu"] = tok
                t["reported_tflops_per_gpu"] = _number(c["Model TFLOP / sec / GPU"])
                t["reported_mfu"] = None
                t["step_time_s"] = round(gbs * seq / (tok * gpus), 3)
                t["step_time_derivation"] = f"{gbs}*{seq}/({c['Tokens / sec / GPU']}*{gpus})"
                t["inferred_fields"] = "dp = gpus/(tp*pp*cp)"
                t["notes"] = MOE_NOTES if moe else ""
                t.name = (f"mb{release.replace('.', '')}-{gpu.split('-')[0]}-{short}-{gpus}g-"
                          f"{c['Precision'].lower()}" + ("-fsdp" if fsdp else ""))
                if any(o.name == t.name for o in out):     # a second batch of one layout
                    t.name += f"-gbs{gbs}"
                out.append(t)
    df = pd.DataFrame(out)
    df.index.name = "id"
    return df.reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("summary", type=Path)
    ap.add_argument("archive", type=Path)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    df = rows([(a.summary, "docs/performance-summary.md"),
               (a.archive, "docs/performance-summary-archive.md")], a.commit)
    if df.id.duplicated().any():
        raise SystemExit(f"duplicate ids: {sorted(df.id[df.id.duplicated()])}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out, index=False)
    print(f"{len(df)} rows -> {a.out}")


if __name__ == "__main__":
    main()
