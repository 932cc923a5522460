"""Shared fixtures: paths to ../shared/validation and small scenario builders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
VALIDATION = REPO.parent / "shared" / "validation"


def validation_csv(name: str) -> pd.DataFrame:
    path = VALIDATION / name
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is beside the repo in CI)")
    return pd.read_csv(path)


def small_scenario(**sections) -> dict:
    """A valid 64-GPU GPT scenario mapping; keyword sections are merged over it."""
    base = {
        "name": "small",
        "workload": {"model": "megatron-gpt-1.7b", "seq_len": 2048, "global_batch": 64,
                     "micro_batch": 1},
        "parallel": {"tp": 2, "pp": 2, "sequence_parallel": True, "zero": 1},
        "cluster": {"gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def llama_layout_error(**parallel) -> str:
    """The one-line ScenarioError of Llama 3 8B on one tp 1 x pp 1 stage with ``parallel``
    fields set over it (fails when the scenario is valid or the message spans lines)."""
    from simulator import Scenario, ScenarioError
    d = small_scenario(workload={"model": "llama3-8b", "global_batch": 64},
                       parallel={"tp": 1, "pp": 1, "sequence_parallel": False, **parallel})
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(d)
    assert "\n" not in str(e.value)
    return str(e.value)
