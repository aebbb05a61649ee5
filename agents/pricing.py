"""What a run cost: its token totals at its model's prices (USD per million tokens).

One function computes it for the run page and the API. The price is the model's current
price; a run whose model has no price (neither input nor output) has no cost."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from agents.models import Model

MILLION = Decimal(1_000_000)
SHOWN = Decimal("0.0001")

Prices = dict[str, tuple[Decimal | None, Decimal | None]]


def cost_usd(
    *,
    input_tokens: int,
    output_tokens: int,
    input_price: Decimal | None,
    output_price: Decimal | None,
) -> Decimal | None:
    """input_tokens * input price / 1e6 + output_tokens * output price / 1e6; None when
    neither price is set (an unset side counts as free)."""
    if input_price is None and output_price is None:
        return None
    total = Decimal(0)
    if input_price is not None:
        total += Decimal(int(input_tokens)) * input_price / MILLION
    if output_price is not None:
        total += Decimal(int(output_tokens)) * output_price / MILLION
    return total


def model_prices(slugs: Iterable[str | None] | None = None) -> Prices:
    """Prices by model slug: of `slugs`, or of every model (one query either way)."""
    models = Model.objects.all()
    if slugs is not None:
        wanted = {slug for slug in slugs if slug}
        if not wanted:
            return {}
        models = models.filter(slug__in=wanted)
    return {
        slug: (input_price, output_price)
        for slug, input_price, output_price in models.values_list(
            "slug", "input_price_per_million_usd", "output_price_per_million_usd"
        )
    }


def run_model_id(run: Any) -> str | None:
    spec = run.agent_version.spec if run.agent_version_id else None
    model_id = spec.get("model_id") if isinstance(spec, dict) else None
    return model_id if isinstance(model_id, str) else None


def run_cost_usd(run: Any, prices: Prices | None = None) -> Decimal | None:
    """The run's cost at its pinned version's model's prices. Pass `prices` (from
    `model_prices()`) when costing many runs: no query per run."""
    model_id = run_model_id(run)
    if model_id is None:
        return None
    if prices is None:
        prices = model_prices([model_id])
    input_price, output_price = prices.get(model_id, (None, None))
    return cost_usd(
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        input_price=input_price,
        output_price=output_price,
    )


def cost_text(cost: Decimal | None) -> str | None:
    """The exact cost as a plain decimal string ("0.0000275"), None when unpriced."""
    if cost is None:
        return None
    text = format(cost.normalize(), "f")
    return "0" if Decimal(text) == 0 else text


def cost_label(cost: Decimal | None) -> str:
    """For people: "$0.0123", "<$0.0001" for a tiny non-zero cost, "—" when unpriced."""
    if cost is None:
        return "—"
    if 0 < cost < SHOWN / 2:
        return "<$0.0001"
    return f"${cost.quantize(SHOWN, rounding=ROUND_HALF_UP)}"
