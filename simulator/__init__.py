"""clustersim's engine: scenarios, accounting, (later) the step executor and the fabric."""

from simulator.accounting import Accounting, account
from simulator.errors import InfeasibleError, ScenarioError
from simulator.result import Result
from simulator.scenario import Scenario
from simulator.simulate import simulate

__all__ = ["Accounting", "InfeasibleError", "Result", "Scenario", "ScenarioError", "account",
           "simulate"]
