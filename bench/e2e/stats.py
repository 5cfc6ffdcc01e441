"""Step-time statistics and the loss checks of the end-to-end benchmark.

Standard library only: CI tests them (test_e2e.py) on machines without
PyTorch, and compare.py runs them on the GPU host after the training runs."""
import math

# A run through the plugin must start where native starts (the first
# step's forward pass moves bytes but sums nothing order-dependent) and
# stay on native's curve; the later steps carry NCCL's summation order,
# which differs between its P2P and NET paths.
FIRST_RTOL = 1e-6
CURVE_RTOL = 1e-3


def percentile(values, q):
    """The q-th percentile (0-100) of values, linear between the two
    nearest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(values):
    return percentile(values, 50)


def relative(got, want):
    """|got - want| / |want|; 0 for two equal values, inf against a zero."""
    if got == want:
        return 0.0
    if want == 0:
        return math.inf
    return abs(got - want) / abs(want)


def finite_problems(name, losses):
    """One line per run whose losses are missing or not all finite."""
    if not losses:
        return [f"{name}: no losses"]
    for i, v in enumerate(losses):
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            return [f"{name}: loss at step {i} is {v!r}, not a finite number"]
    return []


def loss_problems(name, native, other, first_rtol=FIRST_RTOL, curve_rtol=CURVE_RTOL):
    """What is wrong with run `name`'s losses against native's: each
    problem a line naming the check; empty when the run tracks native."""
    bad = finite_problems(name, other)
    if bad or finite_problems("native", native):
        return bad
    if len(other) != len(native):
        return [f"{name}: {len(other)} losses against native's {len(native)}"]
    r = relative(other[0], native[0])
    if r > first_rtol:
        bad.append(f"{name}: first loss {other[0]:.9g} against native {native[0]:.9g} "
                   f"(relative {r:.2e} > {first_rtol:g})")
    worst = max(range(len(native)), key=lambda i: relative(other[i], native[i]))
    r = relative(other[worst], native[worst])
    if r > curve_rtol:
        bad.append(f"{name}: loss at step {worst} {other[worst]:.9g} against native "
                   f"{native[worst]:.9g} (relative {r:.2e} > {curve_rtol:g})")
    return bad
