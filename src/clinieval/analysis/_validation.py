"""Input checks shared by the statistics modules.

Every statistic here turns bad input into a one-line :class:`UserError` before any arithmetic,
so a NaN can never leak out of a mismatched, empty or non-finite input and end up in a table.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from clinieval.errors import UserError

FloatArray = NDArray[np.float64]


class UndefinedStatisticError(UserError):
    """The input is valid but the statistic has no value for it (e.g. a constant variable).

    A subclass so that callers looping over many groups (one Kendall tau per instruction, say) can
    catch exactly this case, skip the group and count it, instead of averaging a NaN.
    """


def vector(values: Sequence[float] | NDArray[np.generic], name: str, *, min_n: int = 1) -> FloatArray:
    """A finite 1-d float array of at least ``min_n`` values, or a UserError naming ``name``."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise UserError(f"{name} must be numbers: {e}") from None
    if arr.ndim != 1:
        raise UserError(f"{name} must be a flat sequence of numbers, got shape {arr.shape}")
    if arr.size < min_n:
        what = "is empty" if arr.size == 0 else f"has {arr.size} value(s)"
        raise UserError(f"{name} {what}; at least {min_n} needed")
    if not np.all(np.isfinite(arr)):
        raise UserError(f"{name} contains NaN or infinite values; drop or impute missing items first")
    return arr


def paired(
    x: Sequence[float] | NDArray[np.generic],
    y: Sequence[float] | NDArray[np.generic],
    *,
    min_n: int = 1,
    names: tuple[str, str] = ("x", "y"),
) -> tuple[FloatArray, FloatArray]:
    """Two finite vectors of the same length (one value per item in each)."""
    a = vector(x, names[0], min_n=min_n)
    b = vector(y, names[1], min_n=min_n)
    if a.size != b.size:
        raise UserError(f"{names[0]} has {a.size} values but {names[1]} has {b.size}; they must be paired")
    return a, b


def is_real(value: object) -> bool:
    """A real number (Python or numpy), but not a bool, which is almost always a slip."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def level(value: float, name: str = "level") -> float:
    """A probability strictly between 0 and 1 (a confidence level, alpha or power)."""
    if not (is_real(value) and 0.0 < value < 1.0):
        raise UserError(f"{name} must be between 0 and 1 (exclusive), got {value!r}")
    return float(value)


def positive_int(value: int, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise UserError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def positive_float(value: float, name: str) -> float:
    if not (is_real(value) and math.isfinite(value) and value > 0):
        raise UserError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)
