"""Asy-OS (KDD'16 Alg. 1-3) as plain objects with no I/O, and the schedulers that run in one process.

The protocol core: ``plan.AsyOSPlan`` (who owns which features, how many each keeps), the worker
(``worker.Worker``: Online Substitution on a shard) and its ``links`` (what it knows of ``u_C`` and
what it has sent, for each transport), the central side (``central.Central``), the global budget's
``threshold``, the ``finish`` and the message layout (``wire``). Schedulers move the bytes and are
the only loops over a worker's steps: ``loopback`` (sequential OS), ``simulator`` (KDD'16's bounded
staleness), ``replay`` (each MPI transport in simulated time) and, under MPI, the transports of
``asyos.distributed``.
"""
