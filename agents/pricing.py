"""What a run cost: its token totals at its model's prices (USD per million tokens).

A run keeps the prices its model had when the run was created (`price_snapshot`), so
changing a model's prices changes what new runs cost, never what old runs cost. A run
whose model had no price (neither input nor output) has no cost."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from agents.models import Model

MILLION = Decimal(1_000_000)
SHOWN = Decimal("0.0001")


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


def price_snapshot(spec: dict[str, Any] | None) -> dict[str, Decimal | None]:
    """The Run fields that keep the prices of the model an agent version's `spec` names,
    as they are now (None for both: no such model, a remote agent, or unpriced)."""
    model_id = (spec or {}).get("model_id")
    prices = (
        Model.objects.filter(slug=model_id)
        .values_list("input_price_per_million_usd", "output_price_per_million_usd")
        .first()
        if isinstance(model_id, str) and model_id
        else None
    )
    input_price, output_price = prices or (None, None)
    return {
        "input_price_per_million_usd": input_price,
        "output_price_per_million_usd": output_price,
    }


def run_cost_usd(run: Any) -> Decimal | None:
    """The run's cost at the prices it kept from its creation."""
    return cost_usd(
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        input_price=run.input_price_per_million_usd,
        output_price=run.output_price_per_million_usd,
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
