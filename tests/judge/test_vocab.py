"""The rating scale as data: FairMonitor's 1-5 and the scales users bring (0-3, 1-7, 1-10, 0/1,
explicit and named levels). Expected values are written out by hand from the definitions."""

from __future__ import annotations

import math
import re

import pytest

from judge.vocab import SCALE, Scale


def test_fairmonitor_scale_is_one_to_five() -> None:
    assert str(SCALE) == "1-5"  # messages such as "outside the 1-5 scale" rely on it
    assert SCALE == Scale() == Scale(1, 5) == Scale.parse("1-5")
    assert SCALE.labels == (1, 2, 3, 4, 5) and SCALE.names is None


@pytest.mark.parametrize(
    ("text", "labels", "shown"),
    [
        ("0-3", (0, 1, 2, 3), "0-3"),
        ("1-7", (1, 2, 3, 4, 5, 6, 7), "1-7"),
        ("1-10", (1, 2, 3, 4, 5, 6, 7, 8, 9, 10), "1-10"),
        (" 0 - 3 ", (0, 1, 2, 3), "0-3"),
        ("0/1", (0, 1), "0/1"),
        ("0-1", (0, 1), "0/1"),  # two consecutive levels are shown as the binary form
        ("1,2,3,4,5", (1, 2, 3, 4, 5), "1-5"),  # consecutive levels are a range
        ("0, 25, 50, 75, 100", (0, 25, 50, 75, 100), "0,25,50,75,100"),
        ("-2-2", (-2, -1, 0, 1, 2), "-2-2"),
    ],
)
def test_parse_numeric_forms(text: str, labels: tuple[int, ...], shown: str) -> None:
    scale = Scale.parse(text)
    assert scale.labels == labels
    assert (scale.low, scale.high) == (labels[0], labels[-1])
    assert str(scale) == shown
    assert Scale.parse(str(scale)) == scale  # what the JSON settings echo reads back


def test_named_levels_are_coded_one_two_three_in_order() -> None:
    rubric = Scale.parse("poor, fair, good")
    assert rubric.labels == (1, 2, 3)
    assert rubric.names == ("poor", "fair", "good")
    assert str(rubric) == "poor,fair,good" and Scale.parse(str(rubric)) == rubric
    assert rubric.value_of("Fair") == 2 and rubric.value_of(" GOOD ") == 3
    assert rubric.value_of("excellent") is None
    assert SCALE.value_of("poor") is None  # numeric scales have no names
    assert Scale.of([1, 2, 3], ["poor", "fair", "good"]) == rubric


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", "--scale must look like 1-5, 0/1 or 1,2,3; got 'x'"),
        ("", "--scale must look like 1-5, 0/1 or 1,2,3; got ''"),
        ("5", "--scale must look like 1-5, 0/1 or 1,2,3; got '5'"),
        ("1.5-3", "--scale must look like 1-5, 0/1 or 1,2,3; got '1.5-3'"),
        ("1,,3", "--scale must look like 1-5, 0/1 or 1,2,3; got '1,,3'"),
        ("5-1", "--scale '5-1' must go from low to high"),
        ("3-3", "--scale '3-3' must go from low to high"),
        ("1/0", "--scale '1/0' must go from low to high"),
        ("1,2.5,3", "--scale levels must be whole numbers; got '1,2.5,3'"),
        ("1,3,2", "levels must be distinct and increasing"),
        ("1,1,2", "levels must be distinct and increasing"),
        ("1,good", "--scale levels must be all numbers or all names; got '1,good'"),
        ("low,Low", "level names must be distinct (ignoring case)"),
        ("1-5000", "a scale has at most 1000 levels, got 5000"),
    ],
)
def test_parse_errors_say_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Scale.parse(text)
    if "must look like" in message:  # the general message also says names are allowed
        with pytest.raises(ValueError, match=r"\(levels may also be names: low,mid,high\)$"):
            Scale.parse(text)


def test_constructor_checks_its_fields() -> None:
    with pytest.raises(ValueError, match="low must be below high, got 5-1"):
        Scale(5, 1)
    with pytest.raises(ValueError, match="levels .* must run from low to high"):
        Scale(1, 5, (1, 3, 4))
    with pytest.raises(ValueError, match="names must name each of the 5 levels, got 2"):
        Scale(1, 5, names=("no", "yes"))
    with pytest.raises(ValueError, match="a scale needs at least two levels"):
        Scale.of([3])


def test_membership_is_for_whole_numbers_on_the_levels() -> None:
    assert 3 in SCALE and 3.0 in SCALE and 1 in SCALE and 5 in SCALE
    assert 0 not in SCALE and 6 not in SCALE and 3.5 not in SCALE
    assert True not in SCALE  # a JSON true is not a score of 1
    assert "3" not in SCALE and None not in SCALE and math.nan not in SCALE
    zero_three = Scale.parse("0-3")
    assert 0 in zero_three and 4 not in zero_three
    percent = Scale.parse("0,25,50,75,100")
    assert 25 in percent and 30 not in percent  # whole, within range, but not a level


def test_within_accepts_means_between_the_ends() -> None:
    assert SCALE.within(2.5) and SCALE.within(1) and SCALE.within(5)
    assert not SCALE.within(0.99) and not SCALE.within(5.01)
    assert not SCALE.within(math.nan) and not SCALE.within(math.inf)
    assert not SCALE.within(True) and not SCALE.within("3")
    assert Scale.parse("0/1").within(0.5) and Scale.parse("0-3").within(0)
    assert Scale.parse("0,25,50,75,100").within(30)  # a mean may fall between levels
