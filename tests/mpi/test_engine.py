"""Asy-OS inside an MPI job (``mpiexec -n 3 python -m mpi4py -m pytest --with-mpi tests/mpi``)."""
import numpy as np
import pytest

from asyos.config import RunConfig
from asyos.errors import InputError

CONFIG = RunConfig(n_features=300, n_informative=8, passes=2, quiet=True, seed=4)


def world():
    from mpi4py import MPI
    return MPI.COMM_WORLD


def run_on_two_ranks(config):
    """``run_asy_os`` on world ranks 0 and 1 (one worker); the record on rank 0, else None."""
    from asyos.distributed.driver import run_asy_os
    comm = world()
    pair = comm.Split(0 if comm.Get_rank() < 2 else 1, comm.Get_rank())
    try:
        return run_asy_os(config, pair) if comm.Get_rank() < 2 else None
    finally:
        pair.Free()
        comm.Barrier()


def sequential_os(config):
    from asyos import OnlineSubstitution
    from asyos.problem import open_data_source
    d = open_data_source(config).load()
    return OnlineSubstitution(budget=8, passes=2, refit=False, random_state=4).fit(d.X, d.y)


@pytest.mark.mpi(min_size=2)
def test_one_worker_stepping_one_by_one_is_sequential_os_bit_for_bit():
    record = run_on_two_ranks(CONFIG.replace(push_mode="each-step"))
    if world().Get_rank() == 0:
        seq = sequential_os(CONFIG)
        assert record["selected"] == seq.support_.tolist()
        assert record["raw_coef"] == seq.raw_coef_[seq.support_].tolist()     # exact
        assert record["staleness"]["max"] == 0 and record["steps_per_push"] == 1


@pytest.mark.mpi(min_size=2)
def test_one_pipelined_worker_is_sequential_os_up_to_rounding():
    """Its view holds every step of its own, so only the summation order differs."""
    record = run_on_two_ranks(CONFIG)
    if world().Get_rank() == 0:
        seq = sequential_os(CONFIG)
        assert record["push_mode"] == "pipelined" and record["staleness"]["max"] == 0
        assert record["selected"] == seq.support_.tolist()
        np.testing.assert_allclose(record["raw_coef"], seq.raw_coef_[seq.support_], rtol=1e-9)


@pytest.mark.mpi(min_size=3)
def test_central_state_equals_the_workers_final_model():
    """No push is lost or applied twice: L(u_C) at the end equals L(X w) of the final weights."""
    from asyos.distributed.driver import run_asy_os
    from asyos.problem import open_data_source
    from asyos.losses import get_loss

    record = run_asy_os(CONFIG.replace(passes=3), world())
    if world().Get_rank() == 0:
        d = open_data_source(CONFIG).load()
        u = d.X[:, record["selected"]] @ np.array(record["raw_coef"])
        expected = get_loss("squared").value(d.y, u)
        assert record["metrics"]["objective_selection"] == pytest.approx(expected, rel=1e-9)
        assert record["n_workers"] == world().Get_size() - 1
        assert sum(w["steps"] for w in record["workers"]) == record["steps"] >= record["pushes"]


@pytest.mark.mpi(min_size=3)
def test_staleness_bound_under_mpi():
    from asyos.distributed.driver import run_asy_os
    record = run_asy_os(CONFIG.replace(max_staleness=1), world())
    if world().Get_rank() == 0:
        assert record["staleness"]["max"] <= 1
        assert len(record["selected"]) == 8


@pytest.mark.mpi(min_size=2)
def test_input_errors_are_raised_on_every_rank():
    from asyos.distributed.driver import run_asy_os
    with pytest.raises(InputError, match="larger than the number of features"):
        run_asy_os(CONFIG.replace(budget=301), world())
