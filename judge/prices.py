"""An endpoint's prices per million tokens (and the share a batch API takes off), and what
tokens cost at them, live or at the batch price; without prices a cost is None (unknown),
never 0."""

from __future__ import annotations

import math
from dataclasses import dataclass

from judge.config import EndpointConfig

MTOK = 1_000_000


def check_amount(name: str, value: float) -> None:
    """ValueError unless ``value`` is a finite number >= 0 (``name`` says which)."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class Prices:
    """One endpoint's prices per million tokens, and the share a batch API takes off both.

    >>> Prices(2.50, 10.00).cost(1_200, 300)
    0.006
    >>> Prices(2.50, 10.00, batch_discount=0.5).cost(1_200, 300, batch=True)
    0.003
    >>> Prices(2.50, 10.00, cached_input_per_mtok=1.25).cost(1_200, 300, cached=1_000)
    0.00475

    Of ``prompt_tokens``, the ``cached`` ones (served from the provider's prompt cache, a part
    of the prompt tokens, never more) cost ``cached_input_per_mtok`` (None: the input price).
    """

    input_per_mtok: float
    output_per_mtok: float
    batch_discount: float = 0.0
    cached_input_per_mtok: float | None = None
    cache_min_tokens: int = 1024
    """The shortest prompt opening the provider caches (estimates only)."""

    def __post_init__(self) -> None:
        check_amount("input_per_mtok", self.input_per_mtok)
        check_amount("output_per_mtok", self.output_per_mtok)
        if self.cached_input_per_mtok is not None:
            check_amount("cached_input_per_mtok", self.cached_input_per_mtok)
        if not (isinstance(self.batch_discount, int | float) and 0 <= self.batch_discount < 1):
            raise ValueError(f"batch_discount must be in [0, 1), got {self.batch_discount!r}")

    @classmethod
    def of(cls, endpoint: EndpointConfig) -> Prices | None:
        """The endpoint's prices; None when either price is not set (cost unknown)."""
        if endpoint.input_price_per_mtok is None or endpoint.output_price_per_mtok is None:
            return None
        return cls(
            endpoint.input_price_per_mtok,
            endpoint.output_price_per_mtok,
            endpoint.batch_discount,
            endpoint.cached_input_price_per_mtok,
            endpoint.cache_min_prompt_tokens,
        )

    @property
    def cached_price(self) -> float:
        """What a million cached prompt tokens cost (the input price when none is set)."""
        cached = self.cached_input_per_mtok
        return self.input_per_mtok if cached is None else cached

    def cost(
        self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False, cached: int = 0
    ) -> float:
        """The price of ``prompt_tokens`` in (``cached`` of them from the provider's prompt
        cache) and ``completion_tokens`` out; ``batch``: sent through a batch API, so
        ``batch_discount`` comes off."""
        check_amount("prompt_tokens", prompt_tokens)
        check_amount("completion_tokens", completion_tokens)
        check_amount("cached", cached)
        if cached > prompt_tokens:
            raise ValueError(f"cached ({cached}) is more than prompt_tokens ({prompt_tokens})")
        # One division of the exact-as-possible sum keeps hand-checkable figures exact.
        full = (
            (prompt_tokens - cached) * self.input_per_mtok
            + cached * self.cached_price
            + completion_tokens * self.output_per_mtok
        ) / MTOK
        return full * (1 - self.batch_discount) if batch else full


def missing_prices_message(endpoint: str) -> str:
    """What to set so that runs of ``endpoint`` have a cost."""
    return (
        f"set input_price_per_mtok and output_price_per_mtok under [endpoints.{endpoint}] in "
        "fairjudge.toml (prices per million tokens, in your currency)"
    )


def batch_cost(
    prices: Prices | None, prompt_tokens: int, completion_tokens: int, cached: int = 0
) -> float | None:
    """What these tokens cost at the batch price; None without prices (cost unknown)."""
    if prices is None:
        return None
    return prices.cost(prompt_tokens, completion_tokens, batch=True, cached=cached)


def live_cost(
    prices: Prices | None, prompt_tokens: int, completion_tokens: int, cached: int = 0
) -> float | None:
    """What these tokens cost sent call by call; None without prices (cost unknown)."""
    return None if prices is None else prices.cost(prompt_tokens, completion_tokens, cached=cached)
