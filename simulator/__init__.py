"""clustersim's engine: scenarios, accounting, (later) the step executor and the fabric."""

from simulator.accounting import Accounting, account
from simulator.errors import InfeasibleError, ScenarioError
from simulator.scenario import Scenario

__all__ = ["Accounting", "InfeasibleError", "Scenario", "ScenarioError", "account"]
