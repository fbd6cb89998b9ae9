"""Seeded synthetic problems of the KDD'16 experiments (Sec. 5), with known support.

``X ~ N(0, 1)`` i.i.d.; ``s`` true features at random positions with ``N(0, 1)`` values;
regression ``y = X w* + noise * N(0, 1)`` (noise 0.1 in the paper), classification
``y = sign(X w* + noise * N(0, 1))`` (noise 0 in the paper). The test split is drawn the same
way, independently. Default ``n = ceil(1.2 s log2 p)``.

Columns are generated in fixed chunks of ``CHUNK`` features, each from its own random stream
``(seed, split, chunk)``. A worker therefore generates only the chunks of its own shard, and any
rank computes ``y`` from the chunks that hold the true features: nobody materialises all of ``X``
unless asked to. The data are identical whatever subset of columns is requested.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import InputError
from . import memory
from .dataset import Dataset, check_fits_in_memory
from .sharding import BLOCK

CHUNK = BLOCK              # columns drawn from one stream (a ``blocked`` shard holds whole chunks)
_TRUTH_STREAM, _NOISE_STREAM = 0x7E57, 0x0153
_SPLITS = {"train": 1, "test": 2}
TASKS = ("regression", "classification")


def default_n_samples(n_informative: int, n_features: int) -> int:
    """``n = ceil(1.2 s log2 p)`` as in KDD'16 Sec. 5."""
    return int(math.ceil(1.2 * n_informative * math.log2(max(n_features, 2))))


@dataclass(frozen=True)
class SyntheticSource:
    """A reproducible synthetic problem; ``load(columns)`` materialises any subset of columns."""

    task: str = "regression"
    n_features: int = 2000
    n_informative: int = 100
    n_samples: Optional[int] = None
    n_test: Optional[int] = None
    noise: Optional[float] = None
    seed: int = 0

    def __post_init__(self):
        if self.task not in TASKS:
            raise InputError(f"unknown synthetic task {self.task!r}; choose regression or classification")
        if self.n_features < 1:
            raise InputError(f"--n-features must be at least 1; got {self.n_features}")
        if not 1 <= self.n_informative <= self.n_features:
            raise InputError(f"--n-informative must be between 1 and n_features={self.n_features}; "
                             f"got {self.n_informative}")
        if self.n_samples is not None and self.n_samples < 1:
            raise InputError(f"--n-samples must be at least 1; got {self.n_samples}")
        if self.n_test is not None and self.n_test < 0:
            raise InputError(f"--n-test must be >= 0; got {self.n_test}")
        if self.noise is not None and (not math.isfinite(self.noise) or self.noise < 0):
            raise InputError(f"--noise must be a finite number >= 0; got {self.noise}")

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def n_train(self) -> int:
        if self.n_samples is not None:
            return int(self.n_samples)
        return default_n_samples(self.n_informative, self.n_features)

    @property
    def n_test_samples(self) -> int:
        return self.n_train if self.n_test is None else int(self.n_test)

    @property
    def noise_level(self) -> float:
        if self.noise is not None:
            return float(self.noise)
        return 0.1 if self.task == "regression" else 0.0

    @property
    def name(self) -> str:
        return (f"synthetic-{self.task}(n={self.n_train}, p={self.n_features}, "
                f"s={self.n_informative}, noise={self.noise_level:g}, seed={self.seed})")

    # -- generation ------------------------------------------------------------------------------
    def true_coef(self) -> np.ndarray:
        rng = np.random.default_rng([self.seed, _TRUTH_STREAM])
        support = np.sort(rng.choice(self.n_features, size=self.n_informative, replace=False))
        coef = np.zeros(self.n_features)
        coef[support] = rng.standard_normal(self.n_informative)
        return coef

    def columns_T(self, columns, split: str = "train") -> np.ndarray:
        """Feature-major block: row ``i`` is column ``columns[i]`` of ``X`` (length n of split)."""
        columns = np.asarray(columns, dtype=np.intp)
        n = self.n_train if split == "train" else self.n_test_samples
        check_fits_in_memory(columns.size * n * 8, f"the synthetic {split} columns ({n} rows x {columns.size} "
                                                  f"columns, float64)")
        out = memory.empty((columns.size, n))
        if columns.size == 0:
            return out
        chunks = columns // CHUNK
        # the distinct chunks without np.unique, whose first call imports numpy.ma (15 ms of CPU in
        # every worker rank; 12 of them share 2 cores under the default mpiexec -n 13)
        for chunk in sorted(set(chunks.tolist())):
            block = self._chunk(int(chunk), split, n)
            where = np.flatnonzero(chunks == chunk)
            out[where] = block[columns[where] - chunk * CHUNK]
        return out

    def _chunk(self, chunk: int, split: str, n: int) -> np.ndarray:
        width = min(CHUNK, self.n_features - chunk * CHUNK)
        rng = np.random.default_rng([self.seed, _SPLITS[split], chunk])
        return rng.standard_normal((width, n))

    def labels(self, split: str = "train", coef: Optional[np.ndarray] = None) -> np.ndarray:
        coef = self.true_coef() if coef is None else coef
        support = np.flatnonzero(coef)
        n = self.n_train if split == "train" else self.n_test_samples
        if n == 0:
            return None
        latent = coef[support] @ self.columns_T(support, split) if support.size else np.zeros(n)
        rng = np.random.default_rng([self.seed, _NOISE_STREAM, _SPLITS[split]])
        if self.noise_level > 0:
            latent = latent + self.noise_level * rng.standard_normal(n)
        if self.task == "classification":
            return np.where(latent >= 0, 1.0, -1.0)
        return latent

    def load(self, columns=None, with_test: bool = True) -> Dataset:
        """Materialise the problem restricted to ``columns`` (global indices; ``None`` = all)."""
        cols = np.arange(self.n_features) if columns is None else np.asarray(columns, dtype=np.intp)
        coef = self.true_coef()
        has_test = with_test and self.n_test_samples > 0
        return Dataset(
            X=self.columns_T(cols, "train").T,
            y=self.labels("train", coef),
            n_features=self.n_features,
            X_test=self.columns_T(cols, "test").T if has_test else None,
            y_test=self.labels("test", coef) if has_test else None,
            columns=None if columns is None else cols,
            true_coef=coef,
            name=self.name,
        )


def generates_columns(source) -> bool:
    """Whether ``source`` makes any column on demand (a synthetic problem)."""
    return hasattr(source, "columns_T")


def generates_test_columns(source) -> bool:
    """Whether ``source`` makes any test column on demand (a synthetic problem with a test split): a
    run then generates the test columns of the selected features only, when it evaluates."""
    return generates_columns(source) and getattr(source, "n_test_samples", 0) > 0


def make_regression(n_features=2000, n_informative=100, n_samples=None, noise=None, seed=0,
                    n_test=None) -> Dataset:
    """KDD'16 regression problem (Sec. 5): returns a ``Dataset`` with ``true_coef``."""
    return SyntheticSource("regression", n_features, n_informative, n_samples, n_test, noise, seed).load()


def make_classification(n_features=1000, n_informative=100, n_samples=None, noise=None, seed=0,
                        n_test=None) -> Dataset:
    """KDD'16 classification problem (Sec. 5): labels ``sign(X w*)`` in {-1, +1}."""
    return SyntheticSource("classification", n_features, n_informative, n_samples, n_test, noise,
                           seed).load()
