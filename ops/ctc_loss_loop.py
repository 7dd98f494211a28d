"""CTCLoss-4's compiled forward recursion (the op is in ops/sequence.py).

The forward variable alpha(t, s), the summed probability of the alignments of the first t
steps that end in extended-label state s, cannot be held as a plain float: it falls below
the smallest float64 within a few hundred steps. The usual cure, log space, costs an exp
and a log per state and step, scalar calls in a compiled loop (NumPy's vectorised ones
need a dozen ufunc calls a step instead).

Here each alpha is a float64 mantissa with an int64 power of two of its own,
alpha = m * 2**e: a floating-point number with a 64-bit exponent. A state's new value adds
its (up to three) predecessors aligned on the largest exponent, by a table of powers
2**-k, then multiplies by the step's class probability and adds that probability's
exponent. All additions are of non-negative numbers, so nothing cancels: every operation
is exact to a rounding, and a term is dropped only when it is below 2**-1074 of the largest
(the terms that logsumexp's exp drops too). No state underflows however long the sequence.

A probability p = exp(x - top) / sum(exp(x - top)) over the step's classes is taken from
the exponentials NumPy computes (vectorised) for the step's sum; where that exponential is
below 2**-100 (a class far below the step's largest logit, or -inf), p is recomputed from
its logarithm as exp(r) * 2**k, so tiny probabilities keep their full precision too.
"""
import math

import numpy as np

from irrun.opkit.compiled import cached_loop

ZERO_EXP = -(2 ** 62)        # the exponent of a zero (any real exponent is far above it)
POW2 = np.array([2.0 ** -k for k in range(1076)])   # 2**-k; 2**-1075 and below round to 0
LAST = POW2.shape[0] - 1
TINY = 2.0 ** -100           # below this, an exponential is recomputed from its logarithm
LOW, HIGH = 2.0 ** -500, 2.0 ** 500    # a mantissa outside these is renormalised
LN2 = math.log(2.0)
# Log-probabilities below this are beyond the int64 exponents' headroom over any sequence
# the caller lets through (at most MAX_STEPS steps): the row is then left to the log-space
# recursion (the caller's), flagged in `fallback`.
MIN_LOG_PROB = -2.0 ** 30
MAX_STEPS = 2 ** 30


def _forward(logits, top, ex, sums, classes, skip, states, logit_len, merge, out, fallback):
    """-ln p(labels | logits) for each row b of the arguments, into out[b].

    logits, ex: [n, T, C] (ex = exp(logits - top)); top, sums: [n, T]; classes: [n, L + 1],
    the blank then the row's decoded labels (the probability slots: state s uses slot 0 if
    s is even, else (s + 1) / 2); skip: [n, 2L + 1], whether state s may be entered from
    s - 2; states: [n], 2 L_b + 1; merge: ctc_merge_repeated (a label state may then stay).
    """
    n = logits.shape[0]
    width = skip.shape[1]
    slots = classes.shape[1]
    # Two zero states in front: s - 1 and s - 2 of state 0.
    m = np.empty(width + 2, np.float64)
    e = np.empty(width + 2, np.int64)
    pm = np.empty(slots, np.float64)
    pe = np.empty(slots, np.int64)
    for b in range(n):
        last_state = states[b] - 1
        steps = logit_len[b]
        if steps == 0:
            out[b] = 0.0          # the empty alignment (label_length is 0 then)
            continue
        for i in range(last_state + 3):
            m[i] = 0.0
            e[i] = ZERO_EXP
        failed = undefined = False
        for t in range(steps):
            # Only states reachable from the start (s <= 2t + 1) that can still reach an
            # end state in the steps left (s >= S - 2(T - t)) change the result.
            high = min(last_state, 2 * t + 1)
            low = max(0, last_state + 1 - 2 * (steps - t))
            scale = sums[b, t]
            if scale != scale:
                # A NaN or +inf logit, or only -inf ones: the step's log-softmax is NaN,
                # and so is the loss, whether or not a path could pass (as in log space).
                undefined = True
                break
            log_sum = math.log(scale)
            # The slots these states use: the blank's, then the labels' of the odd ones.
            first, last = max(1, (low >> 1) + 1), (high + 1) >> 1
            for j in range(first - 1, last + 1):
                slot = 0 if j == first - 1 else j
                k = classes[b, slot]
                x = ex[b, t, k]
                if x >= TINY:
                    pm[slot], pe[slot] = x / scale, 0
                    continue
                log_p = (np.float64(logits[b, t, k]) - np.float64(top[b, t])) - log_sum
                if log_p == -np.inf:
                    pm[slot], pe[slot] = 0.0, ZERO_EXP
                elif log_p < MIN_LOG_PROB:
                    failed = True
                    break
                else:
                    power = math.floor(log_p / LN2)
                    pm[slot], pe[slot] = math.exp(log_p - power * LN2), np.int64(power)
            if failed:
                break
            if t == 0:
                m[2], e[2] = pm[0], pe[0]
                if last_state > 0:
                    m[3], e[3] = pm[1], pe[1]
                continue
            # Descending, so that s - 1 and s - 2 still hold the previous step's values.
            for s in range(high, low - 1, -1):
                i = s + 2
                if s & 1:
                    slot = (s + 1) >> 1
                    m0, e0 = (m[i], e[i]) if merge else (0.0, ZERO_EXP)
                    m2, e2 = (m[i - 2], e[i - 2]) if skip[b, s] else (0.0, ZERO_EXP)
                else:
                    slot = 0
                    m0, e0 = m[i], e[i]
                    m2, e2 = 0.0, ZERO_EXP
                m1, e1 = m[i - 1], e[i - 1]
                top_exp = max(e0, max(e1, e2))
                total = (m0 * POW2[min(top_exp - e0, LAST)] + m1 * POW2[min(top_exp - e1, LAST)]
                         + m2 * POW2[min(top_exp - e2, LAST)])
                value = total * pm[slot]
                power = top_exp + pe[slot]
                if value == 0.0:
                    power = ZERO_EXP
                elif value < LOW or value > HIGH:
                    value, shift = math.frexp(value)
                    power += shift
                m[i], e[i] = value, power
        if failed:
            fallback[b] = True
            continue
        if undefined:
            out[b] = np.nan
            continue
        # The alignments end in the last blank or the last label.
        ma, ea = m[last_state + 2], e[last_state + 2]
        mb, eb = m[last_state + 1], e[last_state + 1]     # a leading zero state when S = 1
        top_exp = max(ea, eb)
        total = ma * POW2[min(top_exp - ea, LAST)] + mb * POW2[min(top_exp - eb, LAST)]
        # No path at all (too few steps for the labels' repeats): +inf.
        # (0.0 - x rather than -x: a certain path gives 0, not -0.)
        out[b] = 0.0 - (math.log(total) + top_exp * LN2) if total > 0.0 else np.inf


forward = cached_loop(_forward)
