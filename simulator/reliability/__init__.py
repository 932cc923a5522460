"""Failures over a training run: recovery and checkpoint costs (:mod:`.costs`), closed forms
(Young / Daly, :mod:`.closed_form`) and the Monte-Carlo of a run (:mod:`.montecarlo`). The
failure catalogue and the ``failures:`` / ``checkpoint:`` sections are configuration
(:mod:`simulator.config.failure_catalogue`, :mod:`simulator.config.failures`); the step's
numbers come in from the caller (:mod:`simulator.failures` joins the two). Imports config/ and
the leaf modules only.
"""
