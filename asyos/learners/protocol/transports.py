"""The transports of Asy-OS, named once: how the workers' changes reach ``u_C``.

* ``shared-memory``: the workers add their changes into ``u_C`` in memory shared on one node; the central
  rank only watches;
* ``messages``: pushes to the central rank, which works across nodes;
* ``node-aggregated``: shared memory within each node, one push per node from its leader.

Each is carried out under MPI by a class of ``asyos.distributed`` whose ``name`` is one of these, and
simulated in one process by ``replay``; the command line's ``--transport`` takes them and ``auto``.
"""
TRANSPORT_NAMES = ("shared-memory", "messages", "node-aggregated")
