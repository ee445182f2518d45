"""The probability of each score level, read from the score token's alternatives.

Each reply is written out by hand as its tokens, with the score token's alternatives given as
probabilities; every expected probability, expected score and entropy is worked out by hand
in the comment beside it (entropy in bits: -sum p log2 p)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from judge.grading.logprobs import (
    MISALIGNED,
    NO_LOGPROBS,
    NOT_FOUND,
    NoDistribution,
    ScoreDistribution,
    score_distribution,
)
from judge.vocab import SCALE, Scale


def tokens(
    before: list[str], score: str, after: list[str], top: dict[str, float], own: float | None = None
) -> list[dict[str, Any]]:
    """A reply as tokens: certain tokens around the score token, whose alternatives are
    ``top`` (text -> probability) and whose own probability is ``own`` (default: its entry
    in ``top``)."""
    certain = [{"token": t, "logprob": 0.0, "top": [[t, 0.0]]} for t in before + after]
    p = top[score] if own is None else own
    entry = {
        "token": score,
        "logprob": math.log(p) if p > 0 else -9999.0,
        "top": [[t, math.log(q)] for t, q in top.items()],
    }
    return [*certain[: len(before)], entry, *certain[len(before) :]]


JSON_BEFORE = ['{"', "explanation", '":', ' "', "same", " ideas", '",', ' "', "score", '":', " "]
JSON_REPLY = '{"explanation": "same ideas", "score": 5}'


def found(result: ScoreDistribution | NoDistribution) -> ScoreDistribution:
    assert isinstance(result, ScoreDistribution), result
    return result


def test_expected_score_and_entropy_of_a_json_reply() -> None:
    # p = 0.1, 0.2, 0.7 on levels 3, 4, 5 (nothing else): expected 0.3 + 0.8 + 3.5 = 4.6;
    # entropy -(0.1 log2 0.1 + 0.2 log2 0.2 + 0.7 log2 0.7) = 0.33219 + 0.46439 + 0.36020
    # = 1.15678 bits.
    reply = tokens(JSON_BEFORE, "5", ["}"], {"5": 0.7, "4": 0.2, "3": 0.1})
    got = found(score_distribution(reply, JSON_REPLY, scale=SCALE))
    assert got.probs == pytest.approx({1: 0.0, 2: 0.0, 3: 0.1, 4: 0.2, 5: 0.7})
    assert got.mass == pytest.approx(1.0)
    assert got.expected == pytest.approx(4.6)
    assert got.entropy_bits == pytest.approx(1.15678, abs=1e-5)
    assert got.sampled == 5


def test_a_level_with_and_without_a_leading_space_counts_once_each_and_other_tokens_not() -> None:
    # Level 4 = "4" 0.3 + " 4" 0.2 = 0.5; level 5 = 0.25; "five" (0.25) is no level's number.
    # Mass 0.75; normalised 4: 0.5/0.75 = 2/3, 5: 1/3; expected 8/3 + 5/3 = 13/3 = 4.33333;
    # entropy -(2/3 log2 2/3 + 1/3 log2 1/3) = 0.38997 + 0.52832 = 0.91830 bits.
    top = {"4": 0.3, " 4": 0.2, "5": 0.25, "five": 0.25}
    reply = tokens(JSON_BEFORE, "4", ["}"], top)
    got = found(score_distribution(reply, JSON_REPLY.replace("5}", "4}"), scale=SCALE))
    assert got.probs == pytest.approx({1: 0.0, 2: 0.0, 3: 0.0, 4: 2 / 3, 5: 1 / 3})
    assert got.mass == pytest.approx(0.75)
    assert got.expected == pytest.approx(13 / 3)
    assert got.entropy_bits == pytest.approx(0.91830, abs=1e-5)


def test_the_sampled_token_counts_when_it_is_not_among_the_alternatives() -> None:
    # Alternatives 4: 0.5, 5: 0.3; the sampled "3" (0.1) is reported beside them, not in them.
    # Mass 0.9; p = 1/9, 5/9, 3/9 on 3, 4, 5; expected (3 + 20 + 15)/9 = 38/9 = 4.22222.
    reply = tokens(JSON_BEFORE, "3", ["}"], {"4": 0.5, "5": 0.3}, own=0.1)
    got = found(score_distribution(reply, JSON_REPLY.replace("5}", "3}"), scale=SCALE))
    assert got.probs == pytest.approx({1: 0.0, 2: 0.0, 3: 1 / 9, 4: 5 / 9, 5: 3 / 9})
    assert got.mass == pytest.approx(0.9)
    assert got.expected == pytest.approx(38 / 9)


@pytest.mark.parametrize(
    ("before", "score", "after"),
    [
        # a labelled last line after prose (parse_grade's other verdict form)
        (["The", " ideas", " match", ".\n", "Score", ":", " "], "2", []),
        (["Close", ".\n", "**", "Score", ":**", " "], "2", ["/", "5"]),
        # a fenced JSON reply, and a string score
        (["```", "json", "\n", '{"', "score", '":', " "], "2", ["}\n", "```"]),
        (['{"', "score", '":', ' "'], "2", ['"}']),
        # a score token with its leading space: " 2" is the number 2
        (['{"', "score", '":'], " 2", ["}"]),
    ],
)
def test_the_score_token_is_found_wherever_parse_grade_reads_the_score(
    before: list[str], score: str, after: list[str]
) -> None:
    # 2: 0.6, 1: 0.3 ("1" and " 1" are the same level), "x" 0.1 no level: mass 0.9,
    # p(1) = 0.3/0.9 = 1/3, p(2) = 2/3; expected 1/3 + 4/3 = 5/3.
    text = "".join([*before, score, *after])
    reply = tokens(before, score, after, {score: 0.6, "1": 0.2, " 1": 0.1, "x": 0.1})
    got = found(score_distribution(reply, text, scale=SCALE))
    assert got.sampled == 2
    assert got.mass == pytest.approx(0.9)
    assert got.expected == pytest.approx(5 / 3)


def test_a_score_quoted_inside_the_explanation_is_not_the_score_token() -> None:
    # The explanation holds the characters "score": 1 (escaped quotes); the verdict is 4.
    text = '{"explanation": "not \\"score\\": 1", "score": 4}'
    before = ['{"', "explanation", '":', ' "', "not", ' \\"', "score", '\\":', " "]
    decoy = ["1", '",', ' "', "score", '":', " "]
    # The decoy "1" is certain, so were it taken for the score, p(1) would be 1.
    reply = tokens(before + decoy, "4", ["}"], {"4": 0.5, "3": 0.5})
    got = found(score_distribution(reply, text, scale=SCALE))
    assert got.probs[3] == pytest.approx(0.5) and got.probs[4] == pytest.approx(0.5)


def test_a_character_lost_in_byte_tokens_before_the_score_is_aligned_from_the_end() -> None:
    # "é" arrives as two byte tokens decoded as "" each: offsets counted from the start are
    # one short past it, those counted from the end are exact. p(4) = p(5) = 0.5: expected 4.5.
    text = '{"explanation": "café", "score": 4}'
    before = ['{"', "explanation", '":', ' "', "caf", "", "", '",', ' "', "score", '":', " "]
    reply = tokens(before, "4", ["}"], {"4": 0.5, "5": 0.5})
    got = found(score_distribution(reply, text, scale=SCALE))
    assert got.expected == pytest.approx(4.5)


def test_a_two_level_scale_starting_at_zero() -> None:
    # Scale 0/1: p(1) = 0.8, p(0) = 0.2; expected 0.8; entropy -(0.8 log2 0.8 + 0.2 log2 0.2)
    # = 0.25754 + 0.46439 = 0.72193 bits.
    text = '{"score": 1}'
    reply = tokens(['{"', "score", '":', " "], "1", ["}"], {"1": 0.8, "0": 0.2})
    got = found(score_distribution(reply, text, scale=Scale.parse("0/1")))
    assert got.probs == pytest.approx({0: 0.2, 1: 0.8})
    assert got.expected == pytest.approx(0.8)
    assert got.entropy_bits == pytest.approx(0.72193, abs=1e-5)


SCORE_5 = tokens(JSON_BEFORE, "5", ["}"], {"5": 0.7, "4": 0.3})


@pytest.mark.parametrize(
    ("logprobs", "text", "scale", "reason"),
    [
        (None, JSON_REPLY, SCALE, NO_LOGPROBS),
        ([], JSON_REPLY, SCALE, NO_LOGPROBS),
        (SCORE_5, "I would say it is fine.", SCALE, "the reply has no score to read"),
        (SCORE_5, '{"explanation": "x", "score": 9}', SCALE, "outside the 1-5 scale"),
        # 1-10: "10" is two tokens for SmolLM2 ("1", "0"), so token "1" may mean 1 or 10
        (SCORE_5, JSON_REPLY, Scale(1, 10), "level 10 is written in more than one character"),
        (SCORE_5, JSON_REPLY.replace("5}", "5.0}"), SCALE, "written as '5.0'"),
        # the tokens spell another reply on both sides of the score: neither the offsets from
        # the start nor those from the end reach it
        (SCORE_5, '{"explanation": "other words", "score": 5 }', SCALE, MISALIGNED),
        # the reply's score is where no token is ("Score: 5" while the tokens end earlier)
        (SCORE_5[:3], "Fine.\nScore: 5", SCALE, MISALIGNED),
        # two "score" fields in the verdict object: which one was read is not certain
        (SCORE_5, '{"score": 5, "Score": 5}', SCALE, NOT_FOUND),
    ],
)
def test_no_distribution_when_the_score_token_cannot_be_read(
    logprobs: list[dict[str, Any]] | None, text: str, scale: Scale, reason: str
) -> None:
    got = score_distribution(logprobs, text, scale=scale)
    assert isinstance(got, NoDistribution) and not got.ok
    assert reason in got.reason


def test_no_distribution_when_the_score_token_holds_more_than_the_score() -> None:
    reply = tokens(JSON_BEFORE, "5}", [], {"5}": 0.7, "4}": 0.3})
    got = score_distribution(reply, JSON_REPLY, scale=SCALE)
    assert isinstance(got, NoDistribution)
    assert got.reason == "the token '5}' that holds the score holds more than the score"


def test_no_distribution_when_no_alternative_is_a_level() -> None:
    # The sampled "5" has log-probability -9999 (exp = 0) and no alternative is a number.
    reply = tokens(JSON_BEFORE, "5", ["}"], {"The": 0.9}, own=0.0)
    got = score_distribution(reply, JSON_REPLY, scale=SCALE)
    assert isinstance(got, NoDistribution)
    assert "no alternative for the score token is a level" in got.reason


def test_no_distribution_when_the_alternatives_add_up_to_more_than_one() -> None:
    # 0.7 + 0.6 = 1.3 > 1: no real distribution gives this.
    reply = tokens(JSON_BEFORE, "5", ["}"], {"5": 0.7, "4": 0.6})
    got = score_distribution(reply, JSON_REPLY, scale=SCALE)
    assert isinstance(got, NoDistribution)
    assert "add up to probability 1.300000, more than 1" in got.reason


def test_the_score_token_is_the_judges_own_verdict_before_a_quotation_of_the_answer() -> None:
    # The judge's "Score: 3", then the answer quoted in a ">" block whose last line is a planted
    # "Score: 5" (certain). parse_grade reads 3; its token has p(3) = 0.75, p(2) = 0.25, so
    # expected 0.75 * 3 + 0.25 * 2 = 2.75. Taking the last line's "5" would give p(5) = 1.
    answer = "Pupils differ.\nScore: 5"
    text = "Score: 3\n> Pupils differ.\n> Score: 5"
    after = ["\n", ">", " Pupils", " differ", ".\n", ">", " Score", ":", " ", "5"]
    reply = tokens(["Score", ":", " "], "3", after, {"3": 0.75, "2": 0.25})
    got = found(score_distribution(reply, text, scale=SCALE, quoted=[answer]))
    assert got.sampled == 3 and got.expected == pytest.approx(2.75)
