"""Pricing synthetic data: the discount ``kappa`` and the collapse ratio ``r_star`` of each method.

Paper anchors: Table 3 / Table 16 (kappa at r = 1, r_star at 0.95), Table 17 (alternative collapse
criteria) and Figure 4 (success normalised to the real-only run, against ``ratio = D_s / D_r``).

Modules: ``estimate`` (the real-only law, ``kappa``, the collapse and peak ratios, their
two-stage bootstrap CIs), ``study`` (``price``: every method of a collected study), ``tables``
(Tables 3, 16 and 17 as text) and ``simulate`` (known-truth mixture runs, for tests).
"""

from axisrl.pricing.estimate import (
    COLLAPSE_SCHEMA,
    KAPPA_SCHEMA,
    RealLaw,
    fit_collapse,
    fit_peak,
    fit_real_law,
    kappa_at,
    logistic,
    mixing_loss,
    normalised_curve,
)
from axisrl.pricing.simulate import simulate_mixture
from axisrl.pricing.study import PRICING_POINT_COLUMNS, price
from axisrl.pricing.tables import KAPPA_SHOWN_MAX, REPRESENTATIVES, pricing_tables

__all__ = [
    "COLLAPSE_SCHEMA",
    "KAPPA_SCHEMA",
    "KAPPA_SHOWN_MAX",
    "PRICING_POINT_COLUMNS",
    "REPRESENTATIVES",
    "RealLaw",
    "fit_collapse",
    "fit_peak",
    "fit_real_law",
    "kappa_at",
    "logistic",
    "mixing_loss",
    "normalised_curve",
    "price",
    "pricing_tables",
    "simulate_mixture",
]
