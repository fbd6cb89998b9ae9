"""Running averages of a sample stream: mergeable, standardizable, with optional forgetting.

Thesis Ch. 3 (Sec. 3.1): a stream of samples ``(x_i, y_i)`` is summarized by ``n``, ``mu_x``,
``mu_y``, ``S_xx = X^T X / n``, ``S_xy = X^T y / n`` and ``S_yy = y^T y / n``; memory is ``O(p^2)``
whatever ``n`` is, and every least-squares model (any subset of features, any penalty) can be
extracted from them later (Proposition 2).

**How they are stored.** Raw second moments lose every digit to cancellation when a feature's
mean is large against its spread (``S_xx - mu mu^T`` in eq. 3.3). ``RunningAverages`` keeps sums
*about a shift* ``K`` fixed at the first batch's mean (the "shifted data" method):
``W = sum v_i``, ``s_x = sum v_i (x_i - K)``, ``A_xx = sum v_i (x_i - K)(x_i - K)^T`` and the same for
``y``, with ``v_i`` the weight of sample ``i`` (1 without forgetting). A mini-batch is one in-place
BLAS rank-``b`` update (``dsyrk`` on ``X - K``, lower triangle only), never a loop over samples;
the centred co-moment ``C = A_xx - s_x s_x^T / W`` loses nothing because ``K`` is close to the mean.

**Merging.** Statistics of two streams combine into those of their concatenation: the other
sums are moved to this shift (a rank-2 correction) and added (``merge`` / ``+``). Under MPI every
rank moves its sums to the global mean and a plain ``SUM`` reduction adds them
(``asyos.runs.accumulate``).

**Forgetting** (eq. 3.11): with ``forgetting=alpha`` every running average follows
``a <- (1 - alpha_n) a + alpha_n a(x_{n+1})`` with ``alpha_n = max(alpha, 1/(n+1))``: plain averages
until ``1/alpha`` samples have been seen, then a constant rate. The total weight ``W`` is then the
effective sample size (at most ``1/alpha``). A mini-batch applies exactly the per-sample rule: sample
``i`` of the batch is weighted by the product of the later decay factors. With
``forget_by="batch"`` a whole mini-batch is one term instead: ``a <- (1 - alpha_m) a + alpha_m a(batch)``
with ``alpha_m = max(alpha, b/(W + b))`` (the thesis' drift experiment updates once per time period).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg.blas import dsyr, dsyrk

from ...data.dataset import as_float_matrix, as_label_vector, available_memory_bytes
from ...errors import InputError

_FORMAT = "asyos.RunningAverages/1"

# p x p float64 matrices alive at the peak, measured with tracemalloc at p = 800 (every learner of
# running_averages, fit then extraction): the averages (1.14 with a batch of 100 rows) and the extraction on
# top of them (3.02: the standardized Gram matrix and the extractor's working copies)
ACCUMULATE_MATRICES = 1
EXTRACT_MATRICES = 3
GRAM_MATRICES = ACCUMULATE_MATRICES + EXTRACT_MATRICES
# under MPI every rank holds its averages, a copy moved to the common shift and the buffer it reduces:
# 3 (tracemalloc, p = 400: 5.15 with the root's reduced copy and from_buffers)
REDUCE_MATRICES = 3
# the matrices may take this share of the memory available, the rest is left to the data, the process and the
# other processes of the machine: ofsa on basehock (p = 26214: 4 x 5.1 GiB = 20.5 GiB, peak RSS of dexter's
# p = 20000 run 12.8 GB = 4.0 matrices) passed a check against all of the 21 GiB available and was killed by
# the kernel's OOM killer at 12.3 GiB while other processes ran
MEMORY_SHARE = 0.8
GIB = float(2 ** 30)


def available_memory():
    """Bytes this process may still allocate (``asyos.data.dataset.available_memory_bytes``)."""
    return available_memory_bytes()


def check_gram_memory(n_features, matrices=GRAM_MATRICES, who="running averages"):
    """Raise ``InputError`` when ``matrices`` p x p float64 matrices do not fit in ``MEMORY_SHARE`` of the
    memory available (``available_memory``), before any is allocated. Without the check, p = 10^5 asked
    for 74.5 GiB and died with a traceback (or was killed by the kernel) after reading the data."""
    p = int(n_features)
    one = 8.0 * p * p
    need = matrices * one
    available = available_memory()
    if available is not None and need > MEMORY_SHARE * available:
        raise InputError(f"{who}: the running averages of p = {p} features need {matrices} p x p matrices of "
                         f"{one / GIB:.2f} GiB ({need / GIB:.1f} GiB), more than {MEMORY_SHARE:.0%} of the "
                         f"{available / GIB:.1f} GiB of memory available; select fewer features first, or use a "
                         f"learner whose memory is O(p) (b-arda, ofs, os)")


@dataclass(frozen=True)
class StandardizedStats:
    """Running averages of the standardized data (thesis eqs. 3.2-3.3).

    ``xx`` is ``S_x~x~ = Pi (S_xx - mu_x mu_x^T) Pi`` (the correlation matrix; rows and columns of
    constant features are zero), ``xy = Pi (S_xy - mu_y mu_x)``, ``yy`` the variance of ``y``;
    ``scale`` holds the standard deviations ``sigma_x`` (0 for a constant feature), ``weight`` the
    (effective) number of samples. A coefficient ``b`` found on these maps back to the original
    units as ``coef = b / scale`` and ``intercept = mean_y - mean_x . coef``.
    """

    xx: np.ndarray
    xy: np.ndarray
    yy: float
    scale: np.ndarray
    mean_x: np.ndarray
    mean_y: float
    weight: float

    @property
    def n_features(self) -> int:
        return self.xy.shape[0]

    @property
    def constant(self) -> np.ndarray:
        return self.scale == 0

    def objective(self, beta) -> float:
        """``1/(2W) sum v_i (y~_i - x~_i . beta)^2`` from the averages alone (eq. 3.5)."""
        beta = np.asarray(beta, dtype=float)
        return float(0.5 * beta @ self.xx @ beta - beta @ self.xy + 0.5 * self.yy)

    def to_original(self, beta):
        """``(coef, intercept)`` in the original units for standardized coefficients ``beta``."""
        beta = np.asarray(beta, dtype=float)
        coef = np.zeros_like(beta)
        live = self.scale > 0
        coef[live] = beta[live] / self.scale[live]
        return coef, float(self.mean_y - self.mean_x @ coef)


class RunningAverages:
    """``n, mu_x, mu_y, S_xx, S_xy, S_yy`` of a sample stream (thesis Sec. 3.1).

    Stored as sums about a shift fixed at the first batch's mean, so that nothing is lost to
    cancellation; two sets of averages merge (``merge``, ``+``) into those of the concatenated
    streams; ``standardize`` gives the averages of the standardized data (eqs. 3.2-3.3) that the
    running-averages learners extract their models from (module docstring).

    Parameters
    ----------
    n_features : int
        ``p`` (>= 1): memory is ``O(p^2)`` whatever the number of samples.
    forgetting : float or None, default=None
        A rate ``alpha`` in (0, 1): ``a <- (1 - alpha_n) a + alpha_n a(x_{n+1})`` with
        ``alpha_n = max(alpha, 1/(n+1))`` (eq. 3.11); ``None``: plain averages.
    forget_by : {"sample", "batch"}, default="sample"
        With ``forgetting``: each sample is one term, or each ``update`` batch is (``alpha_m =
        max(alpha, b/(W + b))``).

    Attributes
    ----------
    n_seen : int
        Samples added (an integer, whatever the weights).
    weight : float
        ``W``, the sum of the samples' weights (``n_seen`` without forgetting; the effective sample
        size, at most ``1/alpha``, with it); also ``n``.
    mean_x : ndarray of shape (n_features,)
        ``mu_x``.
    mean_y : float
        ``mu_y``.
    S_xx : ndarray of shape (n_features, n_features)
        ``X^T X / n`` (a new array at each read).
    S_xy : ndarray of shape (n_features,)
        ``X^T y / n``.
    S_yy : float
        ``y^T y / n``.
    shift_x, shift_y : ndarray of shape (n_features,), float
        The shift ``K`` the sums are taken about.

    Examples
    --------
    >>> import numpy as np
    >>> from asyos import RunningAverages
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    >>> a = RunningAverages(3).update(X[:20], y[:20])
    >>> b = RunningAverages(3).update(X[20:], y[20:])
    >>> bool(np.allclose((a + b).S_xx, X.T @ X / 50))
    True
    >>> (a + b).n_seen
    50
    """

    def __init__(self, n_features: int, forgetting: float | None = None, forget_by: str = "sample"):
        if not isinstance(n_features, (int, np.integer)) or isinstance(n_features, bool) or n_features < 1:
            raise InputError(f"n_features must be a positive integer; got {n_features!r}")
        if forgetting is not None:
            try:
                forgetting = float(forgetting)
            except (TypeError, ValueError):
                raise InputError(f"forgetting must be a number in (0, 1); got {forgetting!r}") from None
            if not 0.0 < forgetting < 1.0:
                raise InputError(f"forgetting must be a number in (0, 1); got {forgetting!r}")
        if forget_by not in ("sample", "batch"):
            raise InputError(f"forget_by must be 'sample' or 'batch'; got {forget_by!r}")
        p = int(n_features)
        self.n_features = p
        self.forgetting = forgetting
        self.forget_by = forget_by
        self.n_seen = 0                      # samples seen (an integer, whatever the weights)
        self.weight = 0.0                    # W = sum of weights (= n_seen without forgetting)
        self.shift_x = np.zeros(p)           # K
        self.shift_y = 0.0
        self.sum_x = np.zeros(p)             # sum v (x - K)
        self.sum_y = 0.0
        self._sxx = np.zeros((p, p))         # sum v (x - K)(x - K)^T, lower triangle valid
        self.sxy = np.zeros(p)               # sum v (x - K)(y - K_y)
        self.syy = 0.0                       # sum v (y - K_y)^2

    # -- updates --------------------------------------------------------------------------------
    def update(self, X, y) -> "RunningAverages":
        """Add one sample (``X`` a vector, ``y`` a number) or a mini-batch (``X`` of shape
        ``(b, p)``, dense or sparse, ``y`` of length ``b``)."""
        if not sp.issparse(X) and np.ndim(X) == 1:
            return self._update_one(X, y)
        X = as_float_matrix(X, "X")
        y = as_label_vector(y, X.shape[0], "y")
        self._check_width(X.shape[1])
        b = X.shape[0]
        if b == 0:
            return self
        if self.weight == 0.0 and self.n_seen == 0:
            self._set_shift(X, y)
        factor, weights = self._decay(b)
        if factor != 1.0:
            self._scale(factor)
        self._add_batch(X, y, weights)
        self.n_seen += b
        return self

    def _update_one(self, x, y):
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
            raise InputError(f"x must be real-valued numbers; got dtype {x.dtype}")
        self._check_width(x.shape[0])
        x = x.astype(np.float64)
        try:
            y = float(y)
        except (TypeError, ValueError):
            raise InputError(f"y must be a number for a single sample; got {y!r}") from None
        if not (np.isfinite(x).all() and np.isfinite(y)):
            raise InputError("x contains NaN or infinite values" if not np.isfinite(x).all()
                             else "y contains NaN or infinite values")
        if self.n_seen == 0 and self.weight == 0.0:
            self.shift_x, self.shift_y = x.copy(), y
        factor, _ = self._decay(1)
        if factor != 1.0:
            self._scale(factor)
        dx, dy = x - self.shift_x, y - self.shift_y
        dsyr(1.0, dx, lower=0, a=self._sxx.T, overwrite_a=1)     # lower triangle of _sxx
        self.sum_x += dx
        self.sum_y += dy
        self.sxy += dy * dx
        self.syy += dy * dy
        self.weight += 1.0
        self.n_seen += 1
        return self

    def _check_width(self, p):
        if p != self.n_features:
            raise InputError(f"X has {p} features, but these running averages have {self.n_features}")

    def _set_shift(self, X, y):
        self.shift_x = np.asarray(X.mean(axis=0)).ravel()
        self.shift_y = float(y.mean())

    def _decay(self, b):
        """``(factor, weights)``: the factor that scales the sums so far and the weights of the
        ``b`` new samples, so that every sample follows eq. 3.11 with ``alpha_n = max(alpha, 1/(n+1))``."""
        alpha = self.forgetting
        if alpha is None:
            return 1.0, None
        if self.forget_by == "batch":          # the batch's averages are one term of eq. 3.11
            if self.weight == 0.0 or b / (self.weight + b) >= alpha:
                return 1.0, None
            return b * (1.0 - alpha) / (alpha * self.weight), None
        cap = 1.0 / alpha
        before = np.minimum(self.weight + np.arange(b), cap)      # W before each new sample
        before[0] = self.weight
        decay = np.where(before + 1.0 <= cap, 1.0, (cap - 1.0) / np.maximum(before, 1e-300))
        decay[before == 0.0] = 1.0
        later = np.ones(b)                                        # product of the later decays
        if b > 1:
            later[:-1] = np.cumprod(decay[:0:-1])[::-1]
        return float(np.prod(decay)), later

    def _scale(self, factor):
        self.weight *= factor
        self.sum_x *= factor
        self.sum_y *= factor
        self._sxx *= factor
        self.sxy *= factor
        self.syy *= factor

    def _add_batch(self, X, y, weights):
        dy = y - self.shift_y
        if sp.issparse(X):
            v = np.ones(X.shape[0]) if weights is None else weights
            Xv = sp.diags(v) @ X
            sum_raw = np.asarray(Xv.sum(axis=0)).ravel()           # sum v x
            K = self.shift_x
            gram = np.asarray((X.T @ Xv).toarray())               # sum v x x^T
            gram -= np.multiply.outer(sum_raw, K) + np.multiply.outer(K, sum_raw)
            gram += v.sum() * np.multiply.outer(K, K)
            self._sxx += np.tril(gram)
            vdy = v * dy
            self.sxy += np.asarray(X.T @ vdy).ravel() - K * vdy.sum()
            self.sum_x += sum_raw - v.sum() * K
            self.sum_y += float(vdy.sum())
            self.syy += float(vdy @ dy)
            self.weight += float(v.sum())
            return
        D = X - self.shift_x
        if weights is None:
            Dw, vdy, w = D, dy, float(X.shape[0])
        else:
            root = np.sqrt(weights)
            Dw, vdy, w = D * root[:, None], weights * dy, float(weights.sum())
        # sum v d d^T into the lower triangle of _sxx, in place: (Dw^T Dw) seen through the
        # Fortran-ordered transposes so that BLAS neither copies X nor the p x p matrix
        dsyrk(1.0, Dw.T, beta=1.0, c=self._sxx.T, trans=0, lower=0, overwrite_c=1)
        self.sxy += D.T @ vdy
        self.sum_x += D.sum(axis=0) if weights is None else weights @ D
        self.sum_y += float(vdy.sum())
        self.syy += float(vdy @ dy)
        self.weight += w

    # -- merging --------------------------------------------------------------------------------
    def merge(self, other: "RunningAverages") -> "RunningAverages":
        """The statistics of this stream followed by ``other`` (a new object; both unchanged)."""
        out = self.copy()
        out.add(other)
        return out

    __add__ = merge

    def add(self, other: "RunningAverages") -> "RunningAverages":
        """Merge ``other`` into this object in place."""
        if not isinstance(other, RunningAverages):
            raise InputError(f"can only merge RunningAverages; got {type(other).__name__}")
        self._check_width(other.n_features)
        if other.n_seen == 0:
            return self
        if self.n_seen == 0:
            self.__dict__.update(other.copy().__dict__)
            self.forgetting = self.forgetting if self.forgetting is not None else other.forgetting
            return self
        moved = other.shifted_to(self.shift_x, self.shift_y)
        self.weight += moved.weight
        self.sum_x += moved.sum_x
        self.sum_y += moved.sum_y
        self._sxx += moved._sxx
        self.sxy += moved.sxy
        self.syy += moved.syy
        self.n_seen += moved.n_seen
        return self

    def shifted_to(self, shift_x, shift_y) -> "RunningAverages":
        """The same statistics with their sums taken about another shift (a new object)."""
        out = self.copy()
        d = np.asarray(self.shift_x - np.asarray(shift_x, dtype=float))
        dy = float(self.shift_y - shift_y)
        W = self.weight
        # sum v (x - K')(x - K')^T = A + s d^T + d s^T + W d d^T, with d = K - K'
        out._sxx += np.tril(np.multiply.outer(self.sum_x, d) + np.multiply.outer(d, self.sum_x)
                            + W * np.multiply.outer(d, d))
        out.sxy = self.sxy + self.sum_x * dy + d * self.sum_y + W * d * dy
        out.syy = self.syy + 2.0 * dy * self.sum_y + W * dy * dy
        out.sum_x = self.sum_x + W * d
        out.sum_y = self.sum_y + W * dy
        out.shift_x = np.array(shift_x, dtype=float)
        out.shift_y = float(shift_y)
        return out

    # -- flat buffers (for a sum-reduction across processes) --------------------------------------
    def to_buffers(self):
        """``(vector, matrix)``: every sum as flat float arrays (the matrix is the lower triangle of
        ``S_xx``, zeros above), which add elementwise when two sets of statistics share a shift."""
        vector = np.concatenate([[self.weight, self.n_seen, self.sum_y, self.syy], self.sum_x, self.sxy])
        return vector, np.ascontiguousarray(np.tril(self._sxx))

    @classmethod
    def from_buffers(cls, vector, matrix, shift_x, shift_y) -> "RunningAverages":
        """Statistics from ``to_buffers`` output (or the elementwise sum of several, taken about the
        shift ``shift_x, shift_y``)."""
        p = matrix.shape[0]
        out = cls(p)
        out.weight, out.n_seen = float(vector[0]), int(round(vector[1]))
        out.sum_y, out.syy = float(vector[2]), float(vector[3])
        out.sum_x, out.sxy = np.array(vector[4:4 + p]), np.array(vector[4 + p:4 + 2 * p])
        out.shift_x, out.shift_y = np.array(shift_x, dtype=float), float(shift_y)
        out._sxx = np.array(matrix)
        return out

    def copy(self) -> "RunningAverages":
        out = RunningAverages.__new__(RunningAverages)
        out.__dict__.update({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()})
        return out

    # -- the averages ---------------------------------------------------------------------------
    def _require_samples(self):
        if self.n_seen == 0 or self.weight <= 0.0:
            raise InputError("the running averages have seen no samples yet")

    @property
    def n(self) -> float:
        """The (effective) number of samples ``W``."""
        return self.weight

    @property
    def mean_x(self) -> np.ndarray:
        self._require_samples()
        return self.shift_x + self.sum_x / self.weight

    @property
    def mean_y(self) -> float:
        self._require_samples()
        return self.shift_y + self.sum_y / self.weight

    def comoment_xx(self) -> np.ndarray:
        """``sum v (x - mu_x)(x - mu_x)^T`` (symmetric, a new array)."""
        self._require_samples()
        C = np.tril(self._sxx)
        C += np.tril(C, -1).T
        C -= np.multiply.outer(self.sum_x, self.sum_x / self.weight)
        return C

    def comoment_xy(self) -> np.ndarray:
        self._require_samples()
        return self.sxy - self.sum_x * (self.sum_y / self.weight)

    def comoment_yy(self) -> float:
        self._require_samples()
        return max(self.syy - self.sum_y * self.sum_y / self.weight, 0.0)

    @property
    def S_xx(self) -> np.ndarray:
        mu = self.mean_x
        return self.comoment_xx() / self.weight + np.multiply.outer(mu, mu)

    @property
    def S_xy(self) -> np.ndarray:
        return self.comoment_xy() / self.weight + self.mean_y * self.mean_x

    @property
    def S_yy(self) -> float:
        return self.comoment_yy() / self.weight + self.mean_y ** 2

    def standardize(self) -> StandardizedStats:
        """The averages of the standardized data (eqs. 3.2-3.3). A feature whose spread is below the
        rounding error of its mean (``sigma <= 64 eps |mu|``, or exactly 0) counts as constant:
        scale 0, never selected. Features on very different scales are all kept."""
        C = self.comoment_xx()
        var = np.maximum(np.diag(C), 0.0)
        W = self.weight
        floor = (64 * np.finfo(float).eps * np.abs(self.mean_x)) ** 2 * W
        live = (var > floor) & (var > 0)
        inv = np.zeros_like(var)
        inv[live] = 1.0 / np.sqrt(var[live])
        R = C * inv[:, None] * inv[None, :]
        np.fill_diagonal(R, live.astype(float))
        scale = np.zeros_like(var)
        scale[live] = np.sqrt(var[live] / W)
        xy = self.comoment_xy() * inv / np.sqrt(W)
        return StandardizedStats(xx=R, xy=xy, yy=self.comoment_yy() / W, scale=scale, mean_x=self.mean_x,
                                 mean_y=self.mean_y, weight=W)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the statistics to an ``.npz`` file (``RunningAverages.load`` reads it back)."""
        path = os.fspath(path)
        try:
            with open(path, "wb") as fh:
                np.savez(fh, format=np.array(_FORMAT), n_seen=np.array(self.n_seen),
                         forgetting=np.array(np.nan if self.forgetting is None else self.forgetting),
                         forget_by=np.array(self.forget_by),
                         weight=np.array(self.weight), shift_x=self.shift_x, shift_y=np.array(self.shift_y),
                         sum_x=self.sum_x, sum_y=np.array(self.sum_y), sxx=np.tril(self._sxx),
                         sxy=self.sxy, syy=np.array(self.syy))
        except OSError as exc:
            raise InputError(f"cannot write running averages to {path!r}: {exc.strerror}") from None

    @classmethod
    def load(cls, path) -> "RunningAverages":
        path = os.fspath(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                if "format" not in z or str(z["format"]) != _FORMAT:
                    raise InputError(f"{path!r} is not a running-averages file written by asyos")
                fields = {k: z[k] for k in z.files}
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read running averages from {path!r}: {exc}") from None
        p = fields["shift_x"].shape[0]
        forgetting = float(fields["forgetting"])
        out = cls(p, None if np.isnan(forgetting) else forgetting,
                  str(fields["forget_by"]) if "forget_by" in fields else "sample")
        out.n_seen = int(fields["n_seen"])
        out.weight = float(fields["weight"])
        out.shift_x = np.array(fields["shift_x"], dtype=float)
        out.shift_y = float(fields["shift_y"])
        out.sum_x = np.array(fields["sum_x"], dtype=float)
        out.sum_y = float(fields["sum_y"])
        out._sxx = np.array(fields["sxx"], dtype=float)
        out.sxy = np.array(fields["sxy"], dtype=float)
        out.syy = float(fields["syy"])
        if out._sxx.shape != (p, p) or out.sum_x.shape != (p,) or out.sxy.shape != (p,):
            raise InputError(f"{path!r}: arrays of inconsistent shapes for {p} features")
        return out

    def __repr__(self):
        rate = "" if self.forgetting is None else f", forgetting={self.forgetting:g} per {self.forget_by}"
        return f"RunningAverages(n_features={self.n_features}, n_seen={self.n_seen}{rate})"
