"""Configuration: the scenario, network and failure sections as validated, frozen data (pydantic,
presets expanded) and :mod:`.resolve`, which turns a scenario's ``auto`` fields into a concrete
layout. Imports only workloads/, topologies/ and the leaf modules (errors)."""
