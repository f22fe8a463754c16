"""Seeded, counter-based jitter: the same kernel on the same rank and step always gets the same noise.

Noise is a pure function of (seed, rank, step, micro batch, kernel identity) — a splitmix64 hash,
not a sequential random stream — so two simulations that differ by one problem jitter every
other kernel identically, and their step-time difference is the problem's cost, not noise.
``--seed`` changes only these numbers.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["key_of", "uniform", "kernel_factors", "rank_factor", "RANK_SIGMA", "KERNEL_SIGMA", "COMM_SIGMA"]

RANK_SIGMA = 0.003  # per-rank speed spread (relative std)
KERNEL_SIGMA = 0.002  # per-launch spread of compute kernels
COMM_SIGMA = 0.01  # per-launch spread of transfer times

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def key_of(text: str) -> np.uint64:
    return np.uint64(int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big"))


def _mix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + _M1
        x = (x ^ (x >> np.uint64(30))) * _M2
        x = (x ^ (x >> np.uint64(27))) * _M3
        return x ^ (x >> np.uint64(31))


def uniform(*parts: np.ndarray | int) -> np.ndarray:
    """Uniform [0, 1) from hashing the broadcast of ``parts`` (ints or uint64 arrays)."""
    acc = np.uint64(0x243F6A8885A308D3)
    with np.errstate(over="ignore"):
        for p in parts:
            acc = _mix(np.asarray(acc, dtype=np.uint64) ^ np.asarray(p).astype(np.uint64))
    return (np.asarray(acc) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _centered(u: np.ndarray, sigma: float) -> np.ndarray:
    # uniform noise with standard deviation sigma: (u - 0.5) * sqrt(12) * sigma
    return 1.0 + (u - 0.5) * (12.0 ** 0.5) * sigma


def rank_factor(seed: int, ranks: np.ndarray) -> np.ndarray:
    return _centered(uniform(seed, 7, ranks), RANK_SIGMA)


def kernel_factors(seed: int, ranks: np.ndarray, step: int, micro: int, keys: np.ndarray) -> np.ndarray:
    """(n_ranks, n_kernels) multiplicative noise for compute kernels."""
    return _centered(uniform(seed, ranks[:, None], step, micro, keys[None, :]), KERNEL_SIGMA)


def comm_factors(seed: int, step: int, micro: int, keys: np.ndarray) -> np.ndarray:
    """Per-launch noise of transfer times (shared by every member of a group)."""
    return _centered(uniform(seed, 11, step, micro, keys), COMM_SIGMA)
