"""One step, compiled: exact accounting (parameters, FLOPs, memory), the per-operator compute
model, the communicators of each stage, and the program compiler, which lists the collectives it
needs (:func:`.program.collective_requests`) and costs them through whatever answers
:class:`.requests.Comm`. Imports config/ and the leaf modules only."""
