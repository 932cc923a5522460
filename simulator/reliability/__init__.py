"""Failures over a training run: catalogue, recovery and checkpoint costs, Monte-Carlo.

Entry points live in :mod:`simulator.failures` (``failure_run``, ``ettr_vs_interval``);
this package's config module is imported by the scenario, so nothing heavier is imported here.
"""
