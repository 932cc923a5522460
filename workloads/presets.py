"""YAML presets of real models (workloads/presets/models/NAME.yaml), each citing its source."""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources

import yaml

_PRESET_DIR = "presets/models"


@lru_cache(maxsize=None)
def yaml_presets(package: str, folder: str) -> dict[str, dict]:
    """Every ``folder/NAME.yaml`` shipped in ``package``, parsed: {NAME: mapping}."""
    root = resources.files(package).joinpath(folder)
    return {p.name[:-5]: yaml.safe_load(p.read_text())
            for p in root.iterdir() if p.name.endswith(".yaml")}


def preset_mapping(presets: dict[str, dict], name: str, what: str) -> dict:
    """A fresh copy of preset ``name`` with its name filled in, or a ValueError listing the rest."""
    if name not in presets:
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(sorted(presets))}")
    return {"name": name, **copy.deepcopy(presets[name])}


def list_models() -> list[str]:
    """Names of the built-in model presets, sorted."""
    return sorted(yaml_presets("workloads", _PRESET_DIR))


def model_mapping(name: str) -> dict:
    """The raw mapping of preset ``name`` (a fresh dict: callers may edit it)."""
    return preset_mapping(yaml_presets("workloads", _PRESET_DIR), name, "model preset")


def load_model(name: str):
    """The validated :class:`~workloads.model.ModelConfig` of preset ``name``."""
    from workloads.model import ModelConfig  # local: model.py imports nothing from here

    return ModelConfig.model_validate(model_mapping(name))
