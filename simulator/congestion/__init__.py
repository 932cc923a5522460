"""The DCQCN / PFC fluid model of a RoCE fabric (Zhu et al., CoNEXT 2016; ConnectX's reaction
point as the HPCC ns-3 model implements it).

Rooms: :mod:`.fluid` (setup, jumps over settled operating points, traces), :mod:`.kernel` (the
compiled step, one function per phase), :mod:`.shapes` (a collective's flows split into
components, one simulation per distinct shape, worker processes), :mod:`.fixed_point` (the
fluid equations' equilibrium).

This package is array-in, array-out: it imports only the configuration (``NetworkConfig``)
and the leaf modules below the network, never the fabric. Its compiled kernel needs numba, so
the package loads its modules when one of the names below is first used (PEP 562), not when
the network layer that calls it is imported: ``import simulator`` stays free of numba.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "simulate_fluid": "fluid", "FluidResult": "fluid", "switch_room": "fluid",
    "FLUID_STEP_S": "fluid", "flows_step": "fluid",
    "simulate_fluid_components": "shapes", "plan_forms": "shapes", "FormPool": "shapes",
    "can_fork_workers": "shapes", "pool_pays_off": "shapes",
    "dcqcn_fixed_point": "fixed_point",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__():
    return __all__
