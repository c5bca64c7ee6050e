"""A comparison of two figures measured in rounds: their ratio, its interval, and one of three verdicts.

    fabricbench study --gpus 0 --model mistral-1b --fabrics default --strategies ddp,fsdp --out run/
    fabricbench report run/ --json          ("comparisons": one entry per pair, each with its verdict)

Method (docs/comparisons.md says the same for users):
- Paired rounds. A study runs its train units in interleaved rounds (A B A B ...), so round k of A and
  round k of B share whatever the machine did at that time. The per-round ratio r_k = x_A,k / x_B,k
  (throughputs) varies much less than either figure. The interval is Student's t on the log-ratios:
  exp(mean(log r) ± t · sd(log r) / √n), the standard paired-t interval taken in log space so that a
  ratio stays positive and A/B and B/A are mirror images (Student 1908; e.g. Wilcox, "Introduction to
  Robust Estimation", ch. 5, on log-scale ratios).
- Unpaired fallback, where rounds cannot be matched (a failed run, an imported record): Welch's t on the
  log values of each side, with the Welch-Satterthwaite degrees of freedom (Welch 1947). Said as
  `paired: false`.
- Three verdicts with a practical margin δ (`--margin`, default 2%): "faster" when the interval lies
  wholly above 1 (the leader is a, so the ratio a/b is ≥ 1); "equivalent" when it lies wholly inside
  [1 − δ, 1 + δ] (the interval inclusion form of two one-sided tests, Schuirmann 1987); otherwise
  "undecided", with the interval, the rounds, and about how many rounds would settle it.
- Looking after every round (and stopping once decided) inflates false decisions. The verdict is
  sequential: looks at rounds first_look, ..., last_look, each at one nominal level α' chosen so that the
  chance that ANY look excludes the true ratio is α (Pocock 1977's constant nominal level, "Group
  sequential methods in the design and analysis of clinical trials", Biometrika 64:191). Pocock's
  constants assume a known variance; here α' is calibrated for the Student t statistics at these very
  looks by simulation: under the null the joint law of (T_k) does not depend on σ, so one seeded Monte
  Carlo run per (first_look, last_look, α) gives α' exactly up to its sampling error (±0.001). The verdict
  is the one of the first decisive look (the study stops there); its interval is that look's.
  The familywise guarantee is per comparison: with several comparisons each keeps its own α.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

ALPHA = 0.05  # the chance that a comparison's interval, at any look, misses the true ratio
MARGIN = 0.02  # δ: within ±2% two figures are "equivalent" (docs/comparisons.md: why 2%)
FIRST_LOOK = 3  # rounds before the first look (at 2 rounds t has 1 degree of freedom: t = 12.7)
VERDICTS = ("faster", "equivalent", "undecided")
MAX_ROUNDS_GUESS = 50  # "about N rounds would settle it" says "more than" beyond this


# -- Student's t without scipy: the regularized incomplete beta by its continued fraction (Numerical Recipes 6.4)
def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1.0 + aa / c
            c = c if abs(c) > 1e-300 else 1e-300
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1.0 - x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| > |t|) for Student's t with df degrees of freedom."""
    return _betai(df / 2.0, 0.5, df / (df + t * t))


@functools.lru_cache(maxsize=4096)
def t_crit(alpha: float, df: float) -> float:
    """The two-sided critical value: P(|T| > c) = alpha (bisection on t_two_sided_p; 1e-9 relative)."""
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > alpha:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_two_sided_p(mid, df) > alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9 * hi:
            break
    return (lo + hi) / 2


@functools.lru_cache(maxsize=256)
def nominal_alpha(first_look: int, last_look: int, alpha: float = ALPHA, sims: int = 200_000) -> float:
    """α' for every look k = first_look..last_look (k paired rounds, k − 1 degrees of freedom) such that
    P(some look's two-sided (1 − α') t interval misses the truth) = alpha (module docstring: Pocock's
    constant nominal level, calibrated for t by a seeded simulation). One look: alpha itself."""
    assert 2 <= first_look <= last_look
    if first_look == last_look:
        return alpha
    import numpy as np  # the calibration only; everything else here is plain math

    rng = np.random.default_rng(20261204)
    x = rng.standard_normal((sims, last_look))
    s1 = np.cumsum(x, axis=1)
    s2 = np.cumsum(x * x, axis=1)
    looks = list(range(first_look, last_look + 1))
    ts = []
    for k in looks:
        mean = s1[:, k - 1] / k
        var = np.maximum(s2[:, k - 1] - k * mean * mean, 1e-300) / (k - 1)
        ts.append(np.abs(mean) / np.sqrt(var / k))
    lo, hi = alpha / len(looks), alpha  # Bonferroni (too strict) .. one look (too loose)
    for _ in range(40):
        mid = (lo + hi) / 2
        crossed = np.zeros(sims, dtype=bool)
        for k, t in zip(looks, ts):
            crossed |= t > t_crit(round(mid, 12), k - 1)
        if crossed.mean() > alpha:
            hi = mid
        else:
            lo = mid
    return round(lo, 6)


@dataclass(kw_only=True)
class Comparison:
    """a against b on one metric (higher is better: throughput). a is the one measured higher, so the
    ratio a/b is ≥ 1; `verdict` says whether that lead is a finding."""

    a: str
    b: str
    fabric: str | None  # the fabric both ran on; None when a and b are fabrics (then `strategy` names it)
    metric: str  # "samples_per_s"
    ratio: float | None  # a / b: the geometric mean of the paired ratios, exp(mean log-ratio) (Welch: of the runs)
    ci95: tuple[float, float] | None  # the sequential 95% interval of the ratio (its deciding look's)
    verdict: str  # VERDICTS
    rounds: int  # paired rounds (unpaired: the smaller side's runs) at the deciding look
    paired: bool
    method: str
    margin: float = MARGIN
    strategy: str | None = None  # set when a and b are fabrics
    rounds_needed: int | None = None  # undecided: about how many rounds would settle it
    note: str | None = None  # undecided for a reason other than noise (too few rounds, a side missing)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci95"] = list(self.ci95) if self.ci95 else None
        d.update(d.pop("extra"))
        return d

    @property
    def decided(self) -> bool:
        return self.verdict != "undecided"

    def text(self) -> str:
        """One sentence, the same in the report, the CLI, advise and the JSON headline."""
        who = f"{self.strategy}: " if self.strategy else (f"on {self.fabric}: " if self.fabric else "")
        n = f"{self.rounds} {'paired ' if self.paired else 'unpaired '}round{'s' if self.rounds != 1 else ''}"
        if self.ratio is None:
            return f"{who}{self.a} against {self.b}: undecided ({self.note or 'no interval'})"
        if self.ci95 is None:
            return (f"{who}{self.a} against {self.b}: undecided, {self.a}/{self.b} {_pct(self.ratio)} "
                    f"({self.note or 'no interval'})")
        lo, hi = self.ci95
        times = _in_times(self.ratio, lo, hi)  # one unit for the figure and its interval
        if self.verdict == "faster":
            return (f"{who}{self.a} is {_ratio(self.ratio, times, signed=False)} faster than {self.b} "
                    f"[{_ratio(lo, times, signed=False)}, {_ratio(hi, times, signed=False)}] ({n})")
        if self.verdict == "equivalent":
            return (f"{who}{self.a} and {self.b} are equivalent within ±{self.margin:.0%} "
                    f"[{_ratio(lo, times)}, {_ratio(hi, times)}] ({n})")
        more = ""
        if self.rounds_needed is not None:
            more = (f"; about {self.rounds_needed} rounds would settle it" if self.rounds_needed <= MAX_ROUNDS_GUESS
                    else f"; more than {MAX_ROUNDS_GUESS} rounds would be needed")
        why = f"{self.note}; " if self.note else ""
        return (f"{who}{self.a} against {self.b}: undecided, {self.a}/{self.b} {_ratio(self.ratio, times)} "
                f"[{_ratio(lo, times)}, {_ratio(hi, times)}] ({why}{n}{more})")


def _in_times(*rs: float) -> bool:
    """A ratio and its interval are said as × when any of them lies beyond 1.5× either way, else all as %:
    one unit for the three ("+19.9% [-21.9%, 1.84×]" read as three scales)."""
    return any(r >= 1.5 or r <= 1 / 1.5 for r in rs)


def _ratio(r: float, times: bool, *, signed: bool = True) -> str:
    """1.034 -> "+3.4%" (or "3.4%" unsigned), or "1.03×" where `times`."""
    if times:
        return f"{r:.2f}×"
    return f"{(r - 1) * 100:+.1f}%" if signed else f"{(r - 1) * 100:.1f}%"


def _pct(r: float) -> str:
    """1.034 -> "+3.4%"; above 1.5 or below 1/1.5, as "2.10×" (a ratio said alone)."""
    return _ratio(r, _in_times(r))


def judge(ci: tuple[float, float], margin: float = MARGIN) -> str:
    """The verdict of an interval of a/b (a leading): faster, equivalent or undecided."""
    lo, hi = ci
    if lo > 1.0 or hi < 1.0:
        return "faster"
    if lo >= 1.0 - margin and hi <= 1.0 + margin:
        return "equivalent"
    return "undecided"


def _paired_ci(logs: Sequence[float], alpha: float) -> tuple[float, float, float]:
    """(mean, half-width, sd) of the log-ratios' (1 − alpha) t interval."""
    n = len(logs)
    m = sum(logs) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in logs) / (n - 1))
    return m, t_crit(alpha, n - 1) * sd / math.sqrt(n), sd


def _welch_ci(la: Sequence[float], lb: Sequence[float], alpha: float) -> tuple[float, float, float]:
    """(difference of log means, half-width, pooled sd per round) of Welch's (1 − alpha) interval."""
    na, nb = len(la), len(lb)
    ma, mb = sum(la) / na, sum(lb) / nb
    va = sum((v - ma) ** 2 for v in la) / (na - 1)
    vb = sum((v - mb) ** 2 for v in lb) / (nb - 1)
    se2 = va / na + vb / nb
    if se2 <= 0:
        return ma - mb, 0.0, 0.0
    df = se2 ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    return ma - mb, t_crit(alpha, df) * math.sqrt(se2), math.sqrt(va + vb)


def log_ratio_interval(xa: Sequence[float], xb: Sequence[float], alpha: float = ALPHA) -> tuple[float, float, float]:
    """(ratio, lo, hi): mean(a) / mean(b) on the log scale with Welch's (1 − alpha) interval, for two sets
    of independent positive samples (the batch picker's step times of two batches in one process)."""
    assert len(xa) >= 2 and len(xb) >= 2 and min(xa) > 0 and min(xb) > 0
    m, h, _ = _welch_ci([math.log(v) for v in xa], [math.log(v) for v in xb], alpha)
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def compare(a: str, b: str, values_a: Sequence[float], values_b: Sequence[float], *,
            rounds_a: Sequence[int | None] | None = None, rounds_b: Sequence[int | None] | None = None,
            fabric: str | None = None, strategy: str | None = None, metric: str = "samples_per_s",
            margin: float = MARGIN, alpha: float = ALPHA, first_look: int = FIRST_LOOK,
            last_look: int | None = None) -> Comparison:
    """Compare two figures measured in rounds (higher is better). values_x[i] was measured in round
    rounds_x[i] (None: unknown, so it cannot be paired). Pairs are the rounds both have; with fewer than
    2 of them, the unpaired (Welch) interval. Looks run from first_look to last_look (default: the rounds
    there are), each at nominal_alpha; the first decisive look gives the verdict."""
    assert 0 < margin < 1 and 0 < alpha < 1
    pa = {r: v for r, v in zip(rounds_a or [], values_a) if r is not None and v and v > 0}
    pb = {r: v for r, v in zip(rounds_b or [], values_b) if r is not None and v and v > 0}
    common = sorted(set(pa) & set(pb))
    xa = [v for v in values_a if v and v > 0]
    xb = [v for v in values_b if v and v > 0]
    base = dict(fabric=fabric, strategy=strategy, metric=metric, margin=margin)
    if not xa or not xb:
        missing = a if not xa else b
        return Comparison(a=a, b=b, ratio=None, ci95=None, verdict="undecided", rounds=0, paired=False,
                          method="none", note=f"{missing} has no measured run", **base)
    paired = len(common) >= 2
    if paired:
        logs = [math.log(pa[r] / pb[r]) for r in common]
        n = len(logs)
    else:
        la, lb = [math.log(v) for v in xa], [math.log(v) for v in xb]
        n = min(len(la), len(lb))
    last = max(last_look or n, n, 2)
    first = max(2, min(first_look, last))
    a_alpha = nominal_alpha(first, last, alpha) if n >= 2 else alpha
    what = "paired t on log-ratios" if paired else "Welch t on log values (rounds not paired)"
    method = (f"{what}; sequential: looks at rounds {first}..{last}, each at {1 - a_alpha:.2%} "
              f"(Pocock constant level, calibrated for t) for {1 - alpha:.0%} over all looks")
    if n < 2:
        m = sum(math.log(v) for v in xa) / len(xa) - sum(math.log(v) for v in xb) / len(xb)
        names = (a, b) if m >= 0 else (b, a)
        return Comparison(a=names[0], b=names[1], ratio=math.exp(abs(m)), ci95=None, verdict="undecided",
                          rounds=n, paired=False, method=method, note="one run each: no interval", **base)
    looks = list(range(first, n + 1)) or [n]  # before the first look: the interval, never a decision
    for k in looks:  # the looks; the first decisive one stops the comparison
        if paired:
            m, h, sd = _paired_ci(logs[:k], a_alpha)
        else:  # unpaired runs have no round order to cut at: every look sees the first k of each side
            m, h, sd = _welch_ci(la[:k] if k < n else la, lb[:k] if k < n else lb, a_alpha)
        m_abs = abs(m)  # oriented so that the leader at this look is a: ratio >= 1
        ci = (math.exp(m_abs - h), math.exp(m_abs + h))
        verdict = judge(ci, margin) if k >= first else "undecided"
        if verdict != "undecided":
            break
    names = (a, b) if m >= 0 else (b, a)
    needed = _rounds_needed(m_abs, sd, margin, a_alpha, k) if verdict == "undecided" else None
    note = f"the first look is at round {first}" if n < first else None
    runs = [len(xa), len(xb)] if m >= 0 else [len(xb), len(xa)]
    return Comparison(a=names[0], b=names[1], ratio=math.exp(m_abs), ci95=ci, verdict=verdict, rounds=k,
                      paired=paired, method=method, rounds_needed=needed, note=note, **base, extra={"runs": runs})


def _rounds_needed(m: float, sd: float, margin: float, alpha: float, n: int) -> int | None:
    """About how many rounds would decide, if the mean and spread stayed as measured: the first n where
    the half-width falls under |m| (faster) or under log(1 + δ) − |m| (equivalent)."""
    if sd <= 0:
        return n + 1
    eq = math.log(1 + margin) - m
    for k in range(max(n + 1, 3), 10 * MAX_ROUNDS_GUESS):
        h = t_crit(alpha, k - 1) * sd / math.sqrt(k)
        if h < m or h < eq:
            return k
    return 10 * MAX_ROUNDS_GUESS


def contradicts(x: dict[str, Any], y: dict[str, Any]) -> bool:
    """Whether two comparisons of the same pair (dicts, as in `report --json`) contradict: "a faster"
    against "b faster", or "faster" against "equivalent". "undecided" contradicts nothing."""
    vx, vy = x.get("verdict"), y.get("verdict")
    if "undecided" in (vx, vy) or vx is None or vy is None:
        return False
    if vx == vy == "equivalent":
        return False
    if vx == vy == "faster":
        return x.get("a") != y.get("a")
    return True  # faster against equivalent
