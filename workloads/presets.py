"""YAML presets of real models (workloads/presets/models/NAME.yaml), each citing its source."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml

_PRESET_DIR = "presets/models"


@lru_cache(maxsize=None)
def _preset_texts() -> dict[str, str]:
    root = resources.files("workloads").joinpath(_PRESET_DIR)
    return {p.name[:-5]: p.read_text() for p in root.iterdir() if p.name.endswith(".yaml")}


def list_models() -> list[str]:
    """Names of the built-in model presets, sorted."""
    return sorted(_preset_texts())


def model_mapping(name: str) -> dict:
    """The raw mapping of preset ``name`` (a fresh dict: callers may edit it)."""
    texts = _preset_texts()
    if name not in texts:
        raise ValueError(f"unknown model preset {name!r}; known: {', '.join(sorted(texts))}")
    data = yaml.safe_load(texts[name])
    data["name"] = name
    return data


def load_model(name: str):
    """The validated :class:`~workloads.model.ModelConfig` of preset ``name``."""
    from workloads.model import ModelConfig  # local: model.py imports nothing from here

    return ModelConfig.model_validate(model_mapping(name))
