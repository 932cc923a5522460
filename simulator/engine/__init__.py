"""Executing a compiled step: pipeline schedules (pure order), the simpy executor (the only
simpy importer) and the closed-form pipeline of the analytic fidelity. Imports step/ only."""
