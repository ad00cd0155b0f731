"""Numerical derivatives by Richardson extrapolation, R ``numDeriv``'s scheme.

lmerTest's Satterthwaite degrees of freedom come from ``numDeriv::hessian`` of the deviance and
``numDeriv::jacobian`` of the fixed-effect covariance. The scheme here is numDeriv's: each
starting step is ``d * |x_i|``, or ``eps`` where ``|x_i| < zero.tol``; ``r = 4`` central
differences with the step halved each time are combined by Richardson's rule
``(4^m a_{k+1} - a_k) / (4^m - 1)`` (``eps = 1e-4``, ``zero.tol = sqrt(.Machine$double.eps /
7e-7)``, ``v = 2``, as numDeriv).

Only the relative step differs: ``d = 1e-2`` where numDeriv takes ``1e-4``. The REML deviance
of :mod:`cueaudit.stats.mixed` eliminates its largest factor by subtracting close numbers, so
it carries rounding errors near 1e-10; numDeriv's steps of about 2e-5 turn those into errors
of 0.5 in a Hessian entry of 40, and the degrees of freedom moved by 0.6%. From ``d = 3e-3``
on, the extrapolated Hessian no longer moves (to 1e-6) and equals lmerTest's, whose deviance
(lme4's sparse Cholesky) is exact enough for the small step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

EPS = 1e-4
D = 1e-2
ZERO_TOL = float(np.sqrt(np.finfo(float).eps / 7e-7))
R = 4
V = 2.0


def _steps(x: np.ndarray) -> np.ndarray:
    return np.abs(D * x) + EPS * (np.abs(x) < ZERO_TOL)


def _extrapolate(a: np.ndarray) -> np.ndarray:
    """Richardson's table over the first axis (successively halved steps)."""
    a = a.copy()
    for m in range(1, R):
        a = (a[1:] * 4.0**m - a[:-1]) / (4.0**m - 1.0)
    return a[0]


def jacobian(func: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """``d func / d x`` as an array of shape ``func(x).shape + (len(x),)``."""
    x = np.asarray(x, dtype=np.float64)
    f0 = np.asarray(func(x), dtype=np.float64)
    out = np.empty((*f0.shape, len(x)))
    for i in range(len(x)):
        h = _steps(x)[i]
        approx = []
        for _ in range(R):
            step = np.zeros_like(x)
            step[i] = h
            approx.append((np.asarray(func(x + step)) - np.asarray(func(x - step))) / (2.0 * h))
            h /= V
        out[..., i] = _extrapolate(np.asarray(approx))
    return out


def hessian(func: Callable[[np.ndarray], float], x: np.ndarray) -> np.ndarray:
    """The Hessian of a scalar function, numDeriv's ``genD`` scheme: the diagonal from
    ``f(x + h) - 2 f(x) + f(x - h)``, each off-diagonal pair from the joint step
    ``f(x + h_i + h_j) - 2 f(x) + f(x - h_i - h_j)`` less the two diagonal terms."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    f0 = float(func(x))
    h0 = _steps(x)
    unit = np.eye(n)
    diagonal = np.empty(n)
    for i in range(n):
        h = h0.copy()
        approx = []
        for _ in range(R):
            f1, f2 = float(func(x + unit[i] * h)), float(func(x - unit[i] * h))
            approx.append((f1 - 2.0 * f0 + f2) / h[i] ** 2)
            h = h / V
        diagonal[i] = _extrapolate(np.asarray(approx))
    out = np.diag(diagonal)
    for i in range(n):
        for j in range(i):
            h = h0.copy()
            approx = []
            for _ in range(R):
                step = unit[i] * h + unit[j] * h
                f1, f2 = float(func(x + step)), float(func(x - step))
                second = f1 - 2.0 * f0 + f2 - diagonal[i] * h[i] ** 2 - diagonal[j] * h[j] ** 2
                approx.append(second / (2.0 * h[i] * h[j]))
                h = h / V
            out[i, j] = out[j, i] = _extrapolate(np.asarray(approx))
    return out
