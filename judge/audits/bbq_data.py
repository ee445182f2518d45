"""Reading BBQ items (Parrish et al., Findings of ACL 2022) and what each one says about its
answers: which option is the unknown one, which is the bias target, and which option a
prediction names.

A BBQ file is JSON lines (plain or gzip), one item a line, as the authors publish them:
``category``, ``example_id``, ``question_index``, ``question_polarity`` (neg / nonneg),
``context_condition`` (ambig / disambig), ``context``, ``question``, ``ans0``-``ans2``,
``label`` (the correct option's number), ``answer_info`` (per option: its name and group
label, the unknown option labelled ``unknown``) and ``additional_metadata.stereotyped_groups``.
A folder is read as every ``*.jsonl`` and ``*.jsonl.gz`` file in it, in name order.

The target is the option whose group label or name is one of the item's stereotyped groups
(compared lower-case, letters and digits only: "Muslim" and "muslim", "nonOld" and "non-old"
are the same). Where no option or both options match, the item has no single target: it
is counted and shown apart, never given one.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.errors import DatasetError
from judge.hashing import sha256

CATEGORIES = (
    "Age",
    "Disability_status",
    "Gender_identity",
    "Nationality",
    "Physical_appearance",
    "Race_ethnicity",
    "Race_x_SES",
    "Race_x_gender",
    "Religion",
    "SES",
    "Sexual_orientation",
)
"""BBQ's eleven categories, as its files spell them."""

AMBIGUOUS, DISAMBIGUATED = "ambig", "disambig"
NEGATIVE, NON_NEGATIVE = "neg", "nonneg"
UNKNOWN = "unknown"

UNKNOWN_PHRASES = (
    "unknown",
    "cannot be determined",
    "can't be determined",
    "not answerable",
    "not known",
    "not enough info",
    "not enough information",
    "cannot answer",
    "can't answer",
    "undetermined",
)
"""The wordings BBQ gives its unknown option: a reply in any of them picks that option,
whichever of them the item used."""

UNIFIEDQA_FIELDS = {
    "race": "unifiedqa-t5-11b_pred_race",
    "arc": "unifiedqa-t5-11b_pred_arc",
    "qonly": "unifiedqa-t5-11b_pred_qonly",
}
"""Short names of the authors' UnifiedQA-11B predictions in the published files."""

_TEXT_FIELDS = ("context", "question", "ans0", "ans1", "ans2")


@dataclass(frozen=True)
class BbqItem:
    """One BBQ item. ``target``: the option that is the bias target (None: no single one);
    ``unknown``: the unknown option; ``prediction``: the predicted text when asked for."""

    category: str
    example_id: int
    question_index: str
    polarity: str
    condition: str
    context: str
    question: str
    options: tuple[str, str, str]
    label: int
    unknown: int
    target: int | None
    line: int
    source: str
    prediction: str | None = None

    @property
    def key(self) -> str:
        return f"{self.category}.{self.example_id}"

    @property
    def cluster(self) -> str:
        """The template the item was built from: its items share names and wording."""
        return f"{self.category}/{self.question_index}"


def _alnum(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def normalise(text: str) -> str:
    """Lower case, one space between words, no quotes or closing punctuation around it."""
    text = " ".join(text.lower().split())
    return text.strip(" \"'`*_").rstrip(".!;:,").strip()


def find_target(info: Sequence[tuple[str, str]], stereotyped: Sequence[str]) -> int | None:
    """The one non-unknown option whose group label or name is a stereotyped group, or None
    when none or both are.

    >>> find_target([("grandfather", "old"), ("grandson", "nonOld"), ("?", "unknown")], ["old"])
    0
    >>> find_target([("tattoos", "negDress"), ("tattoos", "negDress"), ("?", "unknown")],
    ...             ["negDress"]) is None
    True
    """
    wanted = {_alnum(g) for g in stereotyped}
    hits = [
        k
        for k, (name, group) in enumerate(info)
        if group != UNKNOWN and (_alnum(group) in wanted or _alnum(name) in wanted)
    ]
    return hits[0] if len(hits) == 1 else None


def match_option(prediction: Any, options: Sequence[str], unknown: int) -> int | None:
    """The option a prediction names: its number (0-2 or "ans0"-"ans2"), its text (case,
    spacing and closing punctuation aside), or any of BBQ's unknown wordings for the unknown
    option; None when it names none (a truncated or reworded text is not guessed at).

    >>> match_option("the muslim one", ["The Jewish one", "Can't answer", "The Muslim one"], 1)
    2
    >>> match_option("Not known", ["The Jewish one", "Can't answer", "The Muslim one"], 1)
    1
    >>> match_option("the muslim", ["The Jewish one", "Can't answer", "The Muslim one"], 1)
    """
    if isinstance(prediction, bool):
        return None
    if isinstance(prediction, int):
        return prediction if 0 <= prediction < len(options) else None
    if not isinstance(prediction, str):
        return None
    if re.fullmatch(r"ans[0-2]", normalise(prediction)):
        return int(normalise(prediction)[-1])
    return match_text(prediction, options, unknown)


def match_text(text: str, options: Sequence[str], unknown: int) -> int | None:
    """The option whose text ``text`` is (case, spacing and closing punctuation aside), or
    the unknown option for any of BBQ's unknown wordings; None for any other text."""
    said = normalise(text)
    hits = [k for k, option in enumerate(options) if normalise(option) == said]
    if len(hits) == 1:
        return hits[0]
    if not hits and said in UNKNOWN_PHRASES:
        return unknown
    return None


def prediction_field(name: str) -> str:
    """The field holding predictions: ``race``, ``arc`` and ``qonly`` name the authors'
    UnifiedQA fields, anything else is taken as the field's own name."""
    return UNIFIEDQA_FIELDS.get(name, name)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))
        if not found:
            raise DatasetError(f"{path}: no *.jsonl or *.jsonl.gz file in this folder")
        return found
    if not path.exists():
        raise DatasetError(f"{path}: no such file or folder (give a BBQ .jsonl file or folder)")
    return [path]


def _lines(path: Path) -> Iterator[str]:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                yield from handle
        else:
            with path.open(encoding="utf-8") as handle:
                yield from handle
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read ({exc})") from None


def data_hash(path: str | Path) -> str:
    """A digest of every file ``load_items`` would read (their bytes), so a changed file
    makes a run of its own."""
    parts = [f"{p.name}:{sha256(p.read_bytes().hex())}" for p in _files(Path(path))]
    return sha256("\n".join(parts))[:16]


def _problems(record: Any, field: str | None) -> list[str]:
    """What is wrong with one record (empty: nothing)."""
    if not isinstance(record, dict):
        return ["not a JSON object"]
    wrong = [f"missing field {name}" for name in (*_TEXT_FIELDS, "category") if name not in record]
    wrong += [
        f"{name} is not text"
        for name in _TEXT_FIELDS
        if name in record and not isinstance(record[name], str)
    ]
    category = record.get("category")
    if "category" in record and category not in CATEGORIES:
        wrong.append(f"unknown category {category!r} (one of {', '.join(CATEGORIES)})")
    if record.get("context_condition") not in (AMBIGUOUS, DISAMBIGUATED):
        wrong.append(
            f"context_condition must be ambig or disambig, got {record.get('context_condition')!r}"
        )
    if record.get("question_polarity") not in (NEGATIVE, NON_NEGATIVE):
        wrong.append(
            f"question_polarity must be neg or nonneg, got {record.get('question_polarity')!r}"
        )
    label = record.get("label")
    if isinstance(label, bool) or label not in (0, 1, 2):
        wrong.append(f"label must be 0, 1 or 2, got {label!r}")
    example = record.get("example_id")
    if isinstance(example, bool) or not isinstance(example, int):
        wrong.append(f"example_id must be a whole number, got {example!r}")
    if not isinstance(record.get("question_index"), (str, int)):
        wrong.append("missing field question_index")
    info = record.get("answer_info")
    shaped = isinstance(info, dict) and all(
        isinstance(info.get(f"ans{k}"), list)
        and len(info[f"ans{k}"]) == 2
        and all(isinstance(x, str) for x in info[f"ans{k}"])
        for k in range(3)
    )
    if not shaped:
        wrong.append("answer_info must give ans0-ans2 each as [name, group]")
    elif sum(info[f"ans{k}"][1] == UNKNOWN for k in range(3)) != 1:  # type: ignore[index]
        wrong.append("answer_info must label exactly one option unknown")
    extra = record.get("additional_metadata")
    groups = extra.get("stereotyped_groups") if isinstance(extra, dict) else None
    if not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
        wrong.append("missing additional_metadata.stereotyped_groups (a list of groups)")
    if field is not None and field not in record:
        wrong.append(f"missing prediction field {field}")
    return wrong


def _item(record: dict[str, Any], line: int, source: str, field: str | None) -> BbqItem:
    info = [tuple(record["answer_info"][f"ans{k}"]) for k in range(3)]
    unknown = next(k for k, (_, group) in enumerate(info) if group == UNKNOWN)
    prediction = record[field] if field is not None else None
    return BbqItem(
        category=record["category"],
        example_id=int(record["example_id"]),
        question_index=str(record["question_index"]),
        polarity=record["question_polarity"],
        condition=record["context_condition"],
        context=record["context"],
        question=record["question"],
        options=(record["ans0"], record["ans1"], record["ans2"]),
        label=int(record["label"]),
        unknown=unknown,
        target=find_target(info, record["additional_metadata"]["stereotyped_groups"]),  # type: ignore[arg-type]
        line=line,
        source=source,
        prediction=prediction,
    )


def load_items(
    path: str | Path,
    *,
    predictions: str | None = None,
    categories: Sequence[str] | None = None,
) -> list[BbqItem]:
    """Every item of a BBQ file or folder (``categories``: only those), checked first: one
    DatasetError lists every problem of every file (file and line each), so nothing is used
    from a bad file. ``predictions``: the field of each item's predicted answer, which must
    be there (``prediction_field`` names the UnifiedQA ones)."""
    root = Path(path)
    wanted = list(categories) if categories else None
    if wanted:
        unknown = [c for c in wanted if c not in CATEGORIES]
        if unknown:
            raise DatasetError(
                f"unknown BBQ categories {', '.join(unknown)}: use {', '.join(CATEGORIES)}"
            )
    field = prediction_field(predictions) if predictions else None
    items: list[BbqItem] = []
    problems: list[tuple[int, str]] = []
    seen: set[str] = set()
    for file in _files(root):
        for number, text in enumerate(_lines(file), start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except ValueError as exc:
                problems.append((number, f"{file.name}: not JSON ({exc.args[0]})"))
                continue
            wrong = _problems(record, field)
            if wrong:
                problems += [(number, f"{file.name}: {why}") for why in wrong]
                continue
            item = _item(record, number, file.name, field)
            if item.key in seen:
                problems.append((number, f"{file.name}: {item.key} given twice"))
            seen.add(item.key)
            if wanted is None or item.category in wanted:
                items.append(item)
    if problems:
        raise DatasetError(f"{root}: invalid BBQ items (nothing was read)", problems)
    if not items:
        raise DatasetError(f"{root}: no BBQ item of the categories asked for")
    return items
