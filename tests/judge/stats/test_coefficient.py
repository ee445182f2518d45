"""The coefficient record, its JSON form, and the validation of the bootstrap options."""

from __future__ import annotations

import math

import pytest

from judge.stats.coefficient import (
    BootstrapOptions,
    Coefficient,
    UndefinedAgreementWarning,
    UndefinedWarning,
)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_bootstrap": -1}, r"n_bootstrap must be an integer >= 0, got -1"),
        ({"n_bootstrap": 2.5}, r"n_bootstrap must be an integer >= 0, got 2.5"),
        ({"n_bootstrap": True}, r"n_bootstrap must be an integer >= 0"),
        ({"seed": -3}, r"seed must be None or an integer >= 0, got -3"),
        ({"seed": "7"}, r"seed must be None or an integer >= 0, got '7'"),
        ({"confidence": 95}, r"confidence must be between 0 and 1 \(exclusive\), got 95"),
        ({"confidence": 1.0}, r"confidence must be between 0 and 1"),
        ({"confidence": 0}, r"confidence must be between 0 and 1"),
    ],
)
def test_bad_options_name_the_argument(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BootstrapOptions(**kwargs)


def test_options_defaults_and_valid_values() -> None:
    assert BootstrapOptions() == BootstrapOptions(n_bootstrap=1000, seed=0, confidence=0.95)
    assert BootstrapOptions(n_bootstrap=0, seed=None, confidence=0.5).seed is None
    with pytest.raises(AttributeError):
        BootstrapOptions().n_bootstrap = 5  # type: ignore[misc]  # frozen


def test_undefined_coefficient_carries_its_reason_to_json() -> None:
    c = Coefficient.undefined(2, "fewer than 3 items (n=2)")
    assert math.isnan(c.value) and math.isnan(c.ci_low) and math.isnan(c.ci_high)
    assert c.to_dict() == {
        "value": None,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "n": 2,
        "undefined_reason": "fewer than 3 items (n=2)",
    }


def test_defined_coefficient_json_and_half_width() -> None:
    c = Coefficient(0.7, 0.6, 0.8, None, 40)
    assert c.to_dict() == {
        "value": 0.7,
        "ci_low": 0.6,
        "ci_high": 0.8,
        "p_value": None,
        "n": 40,
        "undefined_reason": None,
    }
    assert c.half_width == pytest.approx(0.1)  # (0.8 - 0.6) / 2
    # No CI (no bootstrap): the interval is NaN in Python and null in JSON.
    assert Coefficient(0.7, math.nan, math.nan, 0.01, 40).to_dict()["ci_low"] is None


def test_the_old_warning_name_is_the_same_class() -> None:
    assert UndefinedAgreementWarning is UndefinedWarning
    assert issubclass(UndefinedWarning, UserWarning)
