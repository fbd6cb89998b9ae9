#!/usr/bin/env bash
# Asy-OS on this machine: rank 0 central, ranks 1..N-1 workers.
#   launch/local.sh N [python -m asyos.run options...]
# Uses the python on PATH (or $PYTHON) and the mpiexec installed next to it by the mpich wheel.
set -euo pipefail
n="${1:?usage: launch/local.sh N_RANKS [asyos.run options]}"
shift
python="${PYTHON:-python}"
bindir="$(dirname "$(command -v "$python")")"
mpiexec="$bindir/mpiexec"
[ -x "$mpiexec" ] || mpiexec="$(command -v mpiexec)"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec "$mpiexec" -n "$n" "$python" -m asyos.run "$@"
