"""clustersim: one training step of an LLM on a GPU cluster, simulated (design.md).

The public face: ``Scenario`` (validated input), ``simulate`` (one step -> ``Result``),
``account`` (parameters, FLOPs and memory without simulating). The layers underneath, each
importing only those below it: leaf modules (errors, calibration, arrays, procs) -> config ->
step -> engine / congestion -> network -> reliability -> this face (simulate, result, plots,
failures) -> sweep -> cli.
"""

from simulator.config.scenario import Scenario
from simulator.errors import ScenarioError
from simulator.result import Result
from simulator.simulate import simulate
from simulator.step.accounting import Accounting, account

__all__ = ["Accounting", "Result", "Scenario", "ScenarioError", "account", "simulate"]
