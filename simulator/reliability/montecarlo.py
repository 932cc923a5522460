"""Monte-Carlo of a whole training run under failures, vectorised over trials x interruptions.

The job alternates between running and recovering. Running, it trains for ``interval`` and
then stalls ``blocking`` to checkpoint; a checkpoint is durable ``persist`` after its stall ends
(two-stage and in-memory saves finish in the background). Interruptions arrive in calendar time
(Poisson, or a Weibull renewal process); each one costs detection + diagnosis (+ swap to a
spare, waiting for one if the pool is empty) + restart (launch, communication init, reload),
and a failure that hits a running job loses the training done since the last durable
checkpoint. A failure during a recovery restarts it (recovery is a fresh start, not a queue).
A planned stop saves first and loses nothing.

Per trial, every second of wall time is exactly one of: productive training kept, training
lost to a failure, checkpoint stall, or recovery (tested: the four add up to the wall time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.reliability.costs import Costs

MAX_WALL_S = 20 * 365 * 86400.0
"""A run that needs longer than this (20 years) is reported as never finishing."""
MAX_EVENTS = 5e7
"""Bound on trials x interruptions held in memory at once (about 400 MB per array)."""


class NeverFinishes(ValueError):
    """The job cannot reach its token target: failures outpace recovery and checkpoints."""


@dataclass
class Trials:
    wall_s: np.ndarray
    """[trial] wall time of the run (the horizon, or the time to train)."""
    productive_s: np.ndarray
    """[trial] training time kept."""
    lost_s: np.ndarray
    """[trial] training redone after failures."""
    stall_s: np.ndarray
    """[trial] checkpoint stalls."""
    down_s: np.ndarray
    """[trial] recovery time (detection to training again)."""
    interruptions: np.ndarray
    """[trial, component] interruptions by cause."""
    cause_down_s: np.ndarray
    """[trial, component] recovery time by cause."""
    cause_lost_s: np.ndarray
    """[trial, component] lost training by cause."""
    spare_wait_s: np.ndarray
    """[trial] recovery time spent waiting for a spare node (part of ``down_s``)."""

    @property
    def ettr(self) -> np.ndarray:
        return self.productive_s / self.wall_s


def _arrivals(rng: np.random.Generator, rate: float, trials: int, horizon: float,
              distribution: str, shape: float) -> np.ndarray:
    """[trial, k] interruption times, every row reaching past ``horizon``."""
    mean = 1.0 / rate
    n = horizon / mean
    cols = int(n + 10 * math.sqrt(n) + 16)

    def gaps(k: int) -> np.ndarray:
        if distribution == "weibull":
            return rng.weibull(shape, (trials, k)) * mean / math.gamma(1 + 1 / shape)
        return rng.exponential(mean, (trials, k))

    t = np.cumsum(gaps(cols), axis=1)
    while (t[:, -1] < horizon).any():
        t = np.concatenate([t, t[:, -1:] + np.cumsum(gaps(cols), axis=1)], axis=1)
    return t


def _periods(c: Costs) -> tuple[float, float, float]:
    """(interval, period, persist): a save that outlasts the interval stalls the next one."""
    tau = c.interval_s
    blocking = c.blocking_s + max(0.0, c.persist_s - tau)
    return tau, tau + blocking, c.persist_s


def productive(u: np.ndarray, c: Costs) -> np.ndarray:
    """Training time done in ``u`` seconds of running from a fresh (re)start."""
    tau, period, _ = _periods(c)
    # one divmod: floor(u / period) and mod(u, period) computed apart can disagree by a whole
    # period when u is a float hair below a multiple of it (a full interval counted twice)
    whole, rest = np.divmod(u, period)
    return whole * tau + np.minimum(rest, tau)


def durable(u: np.ndarray, c: Costs) -> np.ndarray:
    """Training time safe in a durable checkpoint ``u`` seconds after a (re)start."""
    tau, period, persist = _periods(c)
    return np.maximum(np.floor((u - persist) / period), 0.0) * tau


def running_time_for(work: np.ndarray, c: Costs) -> np.ndarray:
    """Inverse of :func:`productive`: running seconds to do ``work`` of training."""
    tau, period, _ = _periods(c)
    n = np.maximum(np.ceil(work / tau) - 1, 0)
    return n * period + (work - n * tau)


def _timeline(c: Costs, t: np.ndarray, cause: np.ndarray):
    """Recovery durations and the run segments between interruptions."""
    T, K = t.shape
    planned, replace = c.planned[cause], c.replace[cause]
    ready = t + c.detect_s[cause] + c.diagnose_s[cause]         # when a spare is asked for
    wait = np.zeros((T, K))
    if c.spares is not None and replace.any():
        if c.spares == 0:
            wait = np.where(replace, c.repair_s, 0.0)
        else:
            pool = np.zeros((T, c.spares))                 # when each spare slot is free
            rows = np.arange(T)
            for k in range(K):
                need = replace[:, k]
                if not need.any():
                    continue
                j = pool.argmin(axis=1)
                w = np.maximum(pool[rows, j] - ready[:, k], 0.0)
                wait[:, k] = np.where(need, w, 0.0)
                r = rows[need]
                pool[r, j[need]] = ready[r, k] + w[need] + c.repair_s
    down = (ready - t) + np.where(replace, c.swap_s + wait, 0.0) + c.restart_s + \
        np.where(planned, c.planned_save_s, 0.0)
    end = t + down                                         # training resumes (if not hit again)
    start = np.concatenate([np.zeros((T, 1)), end[:, :-1]], axis=1)   # segment k: start -> t_k
    return start, end, planned, (ready, wait)


def simulate_run(c: Costs, *, trials: int, seed: int, horizon_s: float | None = None,
                 work_s: float | None = None, distribution: str = "exponential",
                 weibull_shape: float = 1.0) -> Trials:
    """Run ``trials`` independent training runs of ``horizon_s`` wall seconds, or until
    ``work_s`` seconds of training are done (then ``wall_s`` is each trial's time to train)."""
    if (horizon_s is None) == (work_s is None):
        raise ValueError("give exactly one of horizon_s or work_s")
    rate = float(c.rates_per_s.sum())
    if rate <= 0:
        return _no_failures(c, trials, horizon_s, work_s)
    probs = c.rates_per_s / rate
    guess = horizon_s if horizon_s is not None else work_s * 1.25 + 86400.0
    while True:
        rng = np.random.default_rng(seed)
        t = _arrivals(rng, rate, trials, guess, distribution, weibull_shape)
        cause = np.searchsorted(np.cumsum(probs), rng.random(t.shape),
                                side="right").clip(0, len(probs) - 1)
        start, end, planned, wait = _timeline(c, t, cause)
        if horizon_s is not None:
            wall = np.full(trials, float(horizon_s))
            break
        run = np.maximum(t - start, 0.0)                   # running time of each segment
        hit = t >= start
        gain = np.where(hit & ~planned, durable(run, c), productive(run, c))
        gain = np.where(hit, gain, 0.0)
        before = np.cumsum(gain, axis=1) - gain
        reach = hit & (before + productive(run, c) >= work_s)
        if reach.any(axis=1).all():
            k = reach.argmax(axis=1)
            rows = np.arange(trials)
            wall = start[rows, k] + running_time_for(work_s - before[rows, k], c)
            break
        guess *= 2
        if guess > MAX_WALL_S or trials * rate * guess > MAX_EVENTS:
            raise NeverFinishes(
                f"training does not finish: after {guess / 2 / 86400 / 365:.1f} years of wall "
                f"time some trials have not done {work_s / 86400:.1f} days of training "
                f"(failures outpace recovery and checkpoints)")
    return _account(c, t, cause, start, end, planned, wait, wall)


def _account(c: Costs, t, cause, start, end, planned, wait, wall) -> Trials:
    T, K = t.shape
    H = wall[:, None]
    inside = t < H                                          # interruptions within the run
    s = np.minimum(start, H)
    run = np.clip(np.minimum(t, H) - s, 0.0, None)
    hit = inside & (t >= start)                             # hit a running job
    prod = productive(run, c)
    lost = np.where(hit & ~planned, prod - durable(run, c), 0.0)
    nxt = np.concatenate([t[:, 1:], np.full((T, 1), np.inf)], axis=1)
    down = np.where(inside, np.clip(np.minimum(np.minimum(end, nxt), H) - t, 0.0, None), 0.0)
    ready, wait = wait
    # the part of each wait for a spare that really elapsed (a later failure restarts recovery)
    waited = np.where(inside, np.clip(np.minimum(np.minimum(ready + wait, nxt), H) - ready,
                                      0.0, None), 0.0)
    C = len(c.rates_per_s)
    cz = cause

    def by_cause(v: np.ndarray) -> np.ndarray:
        out = np.zeros((T, C))
        np.add.at(out, (np.repeat(np.arange(T), K), cz.ravel()), np.where(inside, v, 0).ravel())
        return out

    return Trials(wall_s=wall, productive_s=(prod - lost).sum(axis=1), lost_s=lost.sum(axis=1),
                  stall_s=(run - prod).sum(axis=1), down_s=down.sum(axis=1),
                  interruptions=by_cause(np.ones_like(t)), cause_down_s=by_cause(down),
                  cause_lost_s=by_cause(lost),
                  spare_wait_s=waited.sum(axis=1))


def _no_failures(c: Costs, trials: int, horizon_s, work_s) -> Trials:
    wall = np.full(trials, float(horizon_s) if horizon_s is not None else
                   float(running_time_for(np.array(work_s), c)))
    prod = productive(wall, c)
    C = len(c.rates_per_s)
    zero = np.zeros(trials)
    return Trials(wall_s=wall, productive_s=prod, lost_s=zero, stall_s=wall - prod, down_s=zero,
                  interruptions=np.zeros((trials, C)), cause_down_s=np.zeros((trials, C)),
                  cause_lost_s=np.zeros((trials, C)), spare_wait_s=zero)
