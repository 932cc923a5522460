"""The network: alpha-beta costs, the fabric compiled to arrays with its routing, max-min flow
sharing, NCCL-style collectives lowered to flows, and :class:`.comm.FabricComm`, which answers
the step's collective requests on the fabric (through congestion/ under DCQCN). Front ends:
:mod:`.nccl_tests`, :mod:`.flowfile`; fabrics to simulate on: :mod:`.build`."""
