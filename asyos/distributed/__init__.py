"""Asy-OS under MPI: the driver and one module per transport (messages, shared memory,
node-aggregated), the watchdogs and the supervisor; the running averages reduced across ranks; the
sample-stream learners as simulated data-parallel workers."""
