"""``python -m asyos.run`` that says, as each rank ends, whether it imported scikit-learn (for the launch tests).

Usage: ``mpiexec -n N python report_imports.py [asyos.run arguments...]``; each rank proper (not the supervisor
that forks it, ``asyos.distributed.supervisor``) writes ``report_imports: rank R scikit-learn True|False``
on stderr at exit.
"""
import atexit
import os
import runpy
import sys

from asyos.distributed.supervisor import should_supervise


def _report():
    if not should_supervise():         # the rank (the supervisor that forked it would supervise)
        rank = os.environ.get("PMI_RANK", 0)
        sys.stderr.write(f"report_imports: rank {rank} scikit-learn {'sklearn' in sys.modules}\n")
        sys.stderr.flush()


atexit.register(_report)
sys.argv = ["asyos.run", *sys.argv[1:]]
runpy.run_module("asyos.run", run_name="__main__", alter_sys=True)
