"""Builders of the validation tables (not installed): published step and layer times
(:mod:`.published`), the ns-3 packet-level comparisons (:mod:`.ns3`) and the DCQCN fairness and
fixed-point checks (:mod:`.dcqcn`). Used by scripts/ and tests/, which run from the repository
root."""
