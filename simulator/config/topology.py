"""A topology given on the command line: a preset name or an inline YAML / JSON mapping."""

from __future__ import annotations

import yaml
from pydantic import TypeAdapter, ValidationError

from simulator.errors import ScenarioError, from_validation_error
from topologies.spec import TopologySpec, topology_mapping

_TOPOLOGY = TypeAdapter(TopologySpec)


def topology_spec(text: str, what: str = "--topology"):
    """A preset name or an inline YAML / JSON mapping, validated."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ScenarioError(f"{what}: not a preset name or a YAML mapping", field=what) from None
    try:
        if isinstance(data, str):
            data = topology_mapping(data)
        return _TOPOLOGY.validate_python(data)
    except ValidationError as err:
        inner = from_validation_error(err)
        raise ScenarioError(f"{what}: {inner}", field=what) from None
    except ValueError as err:
        raise ScenarioError(f"{what}: {err}", field=what) from None
