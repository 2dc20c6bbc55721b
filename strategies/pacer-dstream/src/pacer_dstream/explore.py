"""When dStream explores (``exploration=budgeted``, the default; departs from the paper's letter).

The paper explores by optimism: an entry never measured costs 0, so the shortest path tries it. Every exploring
batch is a batch on a plan nobody measured; under asap admission a slower batch makes the next one larger, so on an
overloaded query one exploring batch delays every batch after it (the README's placement grid). ``budgeted``
keeps two plans:

- the **exploiting** plan: the shortest path over what is known (measured in the batch's bucket, or estimated from
  the buckets that measured it, ``cold_start``); an entry never measured anywhere is not chosen (infinite), unless
  neither device of that operator ever ran (the first batch: the CPU, as the paper's ties);
- the **exploring** plan: the paper's optimism: an entry never measured anywhere costs 0, and a *stale* estimate
  (extrapolated from batches ``stale_factor`` times smaller or larger than this one) costs its optimistic bound
  (its estimate at the nearest smaller size: costs grow with size).

The exploring plan runs only when it passes its gate, else the exploiting plan runs:

- **gain share** (a plan that tries an entry never measured anywhere): the most moving operators to an untried
  device can save is what those operators cost where the exploiting plan puts them; exploring runs only when that
  is at least ``explore_share`` of the exploiting plan's estimated cost. A plan that moves a small share of the
  work (lr1: its join, the bulk of the batch, has no GPU exec) can gain little, and what it risks (GPU launches,
  PCIe transfers, the whole batch delayed) is not small.
- **budget** (a plan that only re-measures stale estimates): its risk is its cost minus the exploiting plan's, both
  on the estimates (the stale ones as extrapolated); exploring runs only while the risks taken so far plus this one
  stay within ``explore_budget`` of the engine time the query has used (this batch's estimate included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pacer.model import CompiledDAG, Device

EXPLORATIONS = ("budgeted", "paper")
#: what an entry's estimate rests on
MEASURED, EXTRAPOLATED, UNKNOWN = "measured", "extrapolated", "unknown"


@dataclass(frozen=True, slots=True)
class Estimate:
    """T_exec of one (operator, device) for one batch.

    :param point: the estimate the exploiting plan uses (``math.inf`` when ``basis`` is unknown).
    :param optimistic: what the exploring plan uses (0 when unknown; the lower bound when stale).
    :param basis: measured in the batch's bucket, extrapolated from other buckets, or unknown (never measured).
    :param stale: extrapolated from batches more than ``stale_factor`` times smaller or larger.
    """

    point: float
    optimistic: float
    basis: str
    stale: bool = False


def plan_cost(
    dag: CompiledDAG,
    devices: Sequence[Device],
    cpu: Sequence[float],
    gpu: Sequence[float],
    edge_trans: Sequence[float],
    sink_trans: Sequence[float],
) -> float:
    """The cost of a given plan as the mapper counts it: every operator's T_exec on its device, Eq. 3 on every input
    edge that crosses devices (a source is fed from the host), and a GPU sink's result back to the host."""
    total = 0.0
    for i, d in enumerate(devices):
        total += gpu[i] if d == "gpu" else cpu[i]
        parents = dag.parents[i]
        if not parents:
            total += edge_trans[i] if d == "gpu" else 0.0
        else:
            total += sum(edge_trans[i] for p in parents if devices[p] != d)
        if d == "gpu" and dag.is_sink[i]:
            total += sink_trans[i]
    return total


@dataclass
class ExplorationBudget:
    """The gates of ``exploration=budgeted`` and what the query has spent.

    :param share: ``explore_share``: the least share of the exploiting plan's cost an exploring plan that tries an
        entry never measured must move.
    :param budget: ``explore_budget``: the risks of re-measuring stale estimates, as a share of the engine time.
    """

    share: float
    budget: float
    engine_s: float = 0.0
    spent_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"dstream: explore_share must be in [0, 1], got {self.share}")
        if self.budget < 0:
            raise ValueError(f"dstream: explore_budget must be >= 0, got {self.budget}")

    def completed(self, seconds: float) -> None:
        """A batch of the query cost the engine ``seconds``."""
        self.engine_s += max(0.0, seconds)

    def gain_share_ok(self, gain: float, exploit_cost: float) -> bool:
        """Whether moving operators that cost ``gain`` where the exploiting plan puts them is worth trying."""
        return exploit_cost <= 0 or gain >= self.share * exploit_cost

    def risk_ok(self, risk: float, exploit_cost: float) -> bool:
        """Whether a re-measuring plan that may cost ``risk`` more than the exploiting one fits the budget."""
        return self.spent_s + max(0.0, risk) <= self.budget * (self.engine_s + max(0.0, exploit_cost))

    def spend(self, risk: float) -> None:
        """An exploring plan with ``risk`` ran."""
        self.spent_s += max(0.0, risk)
