"""SummEval's expert coherence ratings (../shared/data/summeval, read by path, never copied)
as a users'-own-rubric round trip: 100 summaries as free-form items, the three experts as
raters, and a judge planted to follow the experts' mean with known noise.

Shared by the CLI and the HTTP round-trip tests (tests/annotation/test_rubric_ratings.py,
tests/server/api/test_ratings_api.py). The expected agreement is computed here with scipy,
scikit-learn and krippendorff from the files themselves, never from FairJudge's code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import krippendorff
import numpy as np
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from tests.support.factories import SHARED_DATA, require_shared

SUMMEVAL = SHARED_DATA / "summeval" / "model_annotations_12sys"
RUBRIC = "SUMMARY_COHERENCE"
# Our own wording of a coherence criterion (1-5), in the shape of prompts/rubrics.toml.
RUBRIC_TOML = f'''[{RUBRIC}]
title = "Summary coherence"
compares = "the summary's structure with the article it condenses"
criterion = """
Rate how well the SUMMARY reads as one organised whole: sentences follow from each other and
build a clear account of the ARTICLE, rather than a heap of loosely related facts."""
levels = [
  "Incoherent: disconnected fragments with no discernible order.",
  "Weak: a few sentences connect, but the summary jumps and repeats.",
  "Uneven: the gist can be followed, with noticeable jumps or repetition.",
  "Good: ordered and connected, with a minor awkward transition.",
  "Excellent: every sentence builds on the last into one clear account.",
]
texts = [
  ["ARTICLE", "{{item[prompt]}}"],
  ["SUMMARY", "{{answers[answer]}}"],
]
'''
SYSTEMS = 10  # the first ten systems' files, by name
PER_SYSTEM = 10  # their first ten summaries: 100 in all
RATERS = ("expert1", "expert2", "expert3")
LEVELS = [1, 2, 3, 4, 5]


@dataclass(frozen=True)
class Summary:
    key: str
    article: str
    text: str
    experts: tuple[int, int, int]
    judge: int  # the planted judge score


def require_summeval() -> None:
    """Skip without the data on a developer's machine; in CI (CI=true) a missing folder is a
    broken setup, so fail, naming the path. Every test on the SummEval files calls this
    (here, tests/judge/stats/conftest.py, tests/annotation/test_files.py)."""
    # an empty or absent folder is missing data alike
    require_shared(any(SUMMEVAL.glob("*.jsonl")), SUMMEVAL, "SummEval data")


def load_summaries(seed: int = 25) -> list[Summary]:
    """100 summaries with the three experts' coherence ratings and a planted judge score:
    the experts' mean rounded half up, moved by -1, 0 or +1 (probabilities 0.2, 0.6, 0.2)
    with a seeded generator, kept on 1-5."""
    require_summeval()
    rng = np.random.default_rng(seed)
    found: list[Summary] = []
    for path in sorted(SUMMEVAL.glob("*.jsonl"))[:SYSTEMS]:
        lines = path.read_text(encoding="utf-8").splitlines()[:PER_SYSTEM]
        for line in lines:
            record = json.loads(line)
            experts = tuple(int(a["coherence"]) for a in record["expert_annotations"])
            assert len(experts) == 3
            mean = float(np.mean(experts))
            planted = int(
                np.clip(np.floor(mean + 0.5) + rng.choice([-1, 0, 1], p=[0.2, 0.6, 0.2]), 1, 5)
            )
            found.append(
                Summary(
                    key=f"{record['model_id']}-{record['id'][-12:]}",
                    article=record["text"],
                    text=record["decoded"],
                    experts=experts,  # type: ignore[arg-type]
                    judge=planted,
                )
            )
    assert len(found) == SYSTEMS * PER_SYSTEM
    return found


def items(summaries: list[Summary]) -> list[dict[str, Any]]:
    """The summaries' articles as free-form items (the article is the prompt)."""
    return [{"id": s.key, "stage": "free", "prompt": s.article} for s in summaries]


def answers(summaries: list[Summary]) -> list[dict[str, Any]]:
    """The summaries as answers produced elsewhere."""
    return [{"item_id": s.key, "part": "answer", "text": s.text} for s in summaries]


def rating_rows(summaries: list[Summary]) -> list[dict[str, Any]]:
    """The experts' ratings in the long format `ratings import` reads."""
    return [
        {"item_id": s.key, "rubric": RUBRIC, "rater": rater, "score": score}
        for s in summaries
        for rater, score in zip(RATERS, s.experts, strict=True)
    ]


# A fenced text of the judge prompt (judge.prompts.fence): "<<LABEL code>>", text, "<<END ...>>".
_FENCED = re.compile(r"^<<(ARTICLE|SUMMARY) (\w+)>>\n(.*?)\n<<END \1 \2>>$", re.M | re.S)


def judge_responder(summaries: list[Summary]) -> Any:
    """A stub responder: a judge request (one with a system message) gets the planted score of
    the (article, summary) its prompt shows; anything else the stub's usual reply. Systems
    that wrote the same summary of an article get the first one's score: their prompts are
    the same, so the judge's cache answers them once."""
    planted: dict[tuple[str, str], int] = {}
    for s in summaries:
        planted.setdefault((s.article, s.text), s.judge)

    def respond(messages: list[dict[str, str]]) -> str | None:
        if not any(m["role"] == "system" for m in messages):
            return None
        texts = {label: text for label, _, text in _FENCED.findall(messages[-1]["content"])}
        score = planted[(texts["ARTICLE"], texts["SUMMARY"])]
        return json.dumps({"explanation": "planted", "score": score})

    return respond


def judge_scores(summaries: list[Summary]) -> list[int]:
    """What the judge answers for each summary, in order (see ``judge_responder``)."""
    first: dict[tuple[str, str], int] = {}
    return [first.setdefault((s.article, s.text), s.judge) for s in summaries]


@dataclass(frozen=True)
class Expected:
    n: int
    pearson: float
    spearman: float
    kappa_quadratic: float
    alpha_interval: float
    alpha_ordinal: float


def expected(summaries: list[Summary]) -> Expected:
    """Agreement computed independently: the judge against the experts' mean (scipy), weighted
    kappa against the mean rounded half up (scikit-learn), and the experts among themselves
    (krippendorff, raters x items)."""
    judge = np.array(judge_scores(summaries), dtype=float)
    human = np.array([np.mean(s.experts) for s in summaries])
    matrix = np.array([[s.experts[r] for s in summaries] for r in range(3)], dtype=float)
    return Expected(
        n=len(summaries),
        pearson=float(stats.pearsonr(judge, human).statistic),
        spearman=float(stats.spearmanr(judge, human).statistic),
        kappa_quadratic=float(
            cohen_kappa_score(
                judge.astype(int),
                np.floor(human + 0.5).astype(int),
                labels=LEVELS,
                weights="quadratic",
            )
        ),
        alpha_interval=float(
            krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval")
        ),
        alpha_ordinal=float(
            krippendorff.alpha(
                reliability_data=matrix, level_of_measurement="ordinal", value_domain=LEVELS
            )
        ),
    )
