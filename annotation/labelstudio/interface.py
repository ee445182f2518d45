"""Label Studio labeling interfaces built from the rubrics, and reading annotations back.

Two interfaces: **rating** (annotators score an item's answers with the rubrics the judge
used, one task per item carrying all of the item's campaign rubrics) and **review** (experts
accept, edit or reject a dataset item). This module writes XML configs and task ``data``
dicts and reads annotation ``result`` lists; it never talks to Label Studio (only
``annotation.labelstudio.client`` imports label-studio-sdk).

Blind rating: a rating task carries the item's texts, the model's answers and the rubric
wording, never a judge score, explanation or anything else read from judgments. Community
Label Studio lets any member read every task's data (and predictions) through the API, so
nothing the judge said may reach a task; ``assert_blind`` checks a task against known judge
texts.

Mixed-stage projects. A campaign over S1-S4 puts tasks of different stages in one project,
but Label Studio shows or hides parts of the interface only in reaction to what the annotator
selects (``visibleWhen`` = region/choice selected or unselected), never from task data. So:

- every task carries every data key the config names, empty for what it lacks (Label Studio
  checks on import that tasks hold the keys their object tags read);
- every label, rubric title and criterion is a ``Header`` bound to task data, so what a task
  lacks renders as nothing;
- each rubric's score levels are *dynamic choices* (``<Choices value="$fj_levels_X">``): the
  task lists the levels of its own rubrics and an empty list for the others, so a rubric the
  task lacks shows no buttons. A rubric of N levels (built-in: 5; registered: 2 to 10) offers
  N choices. Each level's visible text is the full definition ("3 — Partial overlap: ...")
  and its ``alias`` is the number, which Label Studio stores in the result instead of the
  visible value; a pulled score must be one of the numbers its task offered
  (``offered_scales``);
- a rubric's optional rationale box appears once a score is chosen for it
  (``visibleWhen="choice-selected"``), so no empty boxes are shown for absent rubrics;
- scores are therefore not ``required`` (a required control with no options would block every
  task lacking that rubric). ``parse_rating(result, expected=...)`` reports a missing or
  extra rubric when annotations are pulled.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.errors import CampaignError
from judge.data.items import OPTIONAL
from judge.grading.rubrics import Rubric
from judge.vocab import SCALE, STAGE_FIELDS, STAGES, Scale

TASK_KEY = "fj_task"  # our id of a task, carried in its data (dedupe on re-import)
SCORE = "score"
RATIONALE = "rationale"
CONTROL_KINDS = (SCORE, RATIONALE)
DECISIONS = ("accept", "edit", "reject")

# A text box that keeps one text, editable after it is added, with no "Add" button: whatever
# is in the box when the annotation is submitted becomes the result.
_ONE_TEXT = {"maxSubmissions": "1", "editable": "true", "showSubmitButton": "false"}
_NAME = re.compile(r"[A-Za-z0-9]\w*", re.ASCII)
# What Label Studio's front end treats as a task-data reference inside an attribute value.
_DATA_REF = re.compile(r"\$[\w[\].{}]+")


# -- names ------------------------------------------------------------------------------------


def control_name(kind: str, rubric: str) -> str:
    """The Label Studio control name of a rubric's score or rationale.

    >>> control_name("score", "TCS"), parse_control_name("rationale_TCS")
    ('score_TCS', ('rationale', 'TCS'))
    """
    if kind not in CONTROL_KINDS:
        raise ValueError(f"kind must be one of {', '.join(CONTROL_KINDS)}, got {kind!r}")
    if not _NAME.fullmatch(rubric):
        raise CampaignError(
            f"rubric name {rubric!r} cannot name a Label Studio control "
            "(use letters, digits and underscores)"
        )
    return f"{kind}_{rubric}"


def parse_control_name(name: str) -> tuple[str, str]:
    """(kind, rubric name) of a control name made by ``control_name``; CampaignError for any
    other name."""
    kind, _, rubric = name.partition("_")
    if kind not in CONTROL_KINDS or not _NAME.fullmatch(rubric):
        raise CampaignError(
            f"annotation has a result from an unknown control {name!r} "
            f"(expected {SCORE}_<RUBRIC> or {RATIONALE}_<RUBRIC>)"
        )
    return kind, rubric


def slot_of(label: str) -> str:
    """The key of a labelled text's slot.

    >>> slot_of("EXPECTED UNBIASED ANSWER")
    'expected_unbiased_answer'
    """
    slot = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
    if not slot:
        raise CampaignError(f"text label {label!r} has no letters or digits to name a slot")
    return slot


def text_slots(rubrics: Sequence[Rubric]) -> list[tuple[str, str]]:
    """(slot, label) of every labelled text the rubrics show, in first-seen order; rubrics that
    label a text the same way (TCS, PCS, ETCS) share its slot."""
    slots: dict[str, str] = {}
    for rubric in rubrics:
        for label, _ in rubric.texts:
            slot = slot_of(label)
            if slots.setdefault(slot, label) != label:
                raise CampaignError(
                    f"text labels {slots[slot]!r} and {label!r} would share the slot {slot!r}"
                )
    return list(slots.items())


# -- rating -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RatingValue:
    """One rubric's rating in one annotation."""

    score: int
    rationale: str | None


def label_config(rubrics: Sequence[Rubric]) -> str:
    """The rating interface for a project whose tasks may come from any stage the ``rubrics``
    apply to (see the module docstring for how absent texts and rubrics stay hidden)."""
    if not rubrics:
        raise CampaignError("a rating interface needs at least one rubric")
    slots = text_slots(rubrics)
    root = ET.Element("View")
    _add(root, "Header", value="Rate the texts below with each rubric shown.", size="3")
    for slot, _ in slots:
        block = _add(root, "View")
        _add(block, "Header", value=f"$fj_label_{slot}", size="5")
        _add(block, "Text", name=f"text_{slot}", value=f"$fj_text_{slot}")
    for rubric in rubrics:
        target = f"text_{slot_of(rubric.texts[0][0])}"
        block = _add(root, "View")
        _add(block, "Header", value=f"$fj_title_{rubric.name}", size="4")
        _add(block, "Header", value=f"$fj_criterion_{rubric.name}", size="5")
        score = control_name(SCORE, rubric.name)
        _add(
            block,
            "Choices",
            name=score,
            toName=target,
            choice="single-radio",
            value=f"$fj_levels_{rubric.name}",
        )
        why = _add(block, "View", visibleWhen="choice-selected", whenTagName=score)
        _add(
            why,
            "TextArea",
            name=control_name(RATIONALE, rubric.name),
            toName=target,
            placeholder="Why this score? (optional)",
            rows="3",
            **_ONE_TEXT,
        )
    return ET.tostring(root, encoding="unicode")


def task_data(
    item_key: str,
    stage: str,
    rubrics: Sequence[Rubric],
    fields: Mapping[str, Any],
    answers: Mapping[str, str],
    campaign_key: str,
) -> dict[str, Any]:
    """The ``data`` of one rating task: our ids, and every slot of ``label_config(rubrics)``,
    filled for the campaign rubrics that apply to ``stage`` and empty for the others.

    ``rubrics`` are the campaign's rubrics (the ones given to ``label_config``). Only item
    texts, answers and rubric wording go in: never anything from judgments (blind rating).
    """
    own = [r for r in rubrics if stage in r.applies_to]
    if not own:
        raise CampaignError(f"item {item_key}: no rubric of this campaign applies to {stage}")
    data: dict[str, Any] = {
        TASK_KEY: f"{campaign_key}:{item_key}",
        "fj_item": item_key,
        "fj_stage": stage,
        "fj_rubrics": [r.name for r in own],
    }
    for slot, _ in text_slots(rubrics):
        data[f"fj_label_{slot}"] = ""
        data[f"fj_text_{slot}"] = ""
    for rubric in rubrics:
        data[f"fj_title_{rubric.name}"] = ""
        data[f"fj_criterion_{rubric.name}"] = ""
        data[f"fj_levels_{rubric.name}"] = []
    filled: dict[str, str] = {}
    for rubric in own:
        for label, text in _render(item_key, rubric, fields, answers):
            if filled.setdefault(label, text) != text:
                raise CampaignError(
                    f"item {item_key}: rubrics label different texts {label!r}; "
                    "one task can show only one of them"
                )
            data[f"fj_label_{slot_of(label)}"] = label
            data[f"fj_text_{slot_of(label)}"] = text
        data[f"fj_title_{rubric.name}"] = f"{rubric.name}: {rubric.title}"
        data[f"fj_criterion_{rubric.name}"] = rubric.criterion.strip()
        data[f"fj_levels_{rubric.name}"] = level_options(rubric)
    return data


def level_options(rubric: Rubric) -> list[dict[str, str]]:
    """The dynamic choices of a rubric's score, one per level of its scale (1..N): the full
    definition shown, the number stored."""
    options = []
    for number, level in zip(rubric.scale.labels, rubric.levels, strict=True):
        if _DATA_REF.search(level):
            # Label Studio would replace "$word" in a choice's value with task data.
            raise CampaignError(f"rubric {rubric.name}: level {number} contains '$': {level!r}")
        options.append({"value": f"{number} — {level}", "alias": str(number)})
    return options


def _render(
    item_key: str, rubric: Rubric, fields: Mapping[str, Any], answers: Mapping[str, str]
) -> list[tuple[str, str]]:
    try:
        return rubric.render_texts(dict(fields), dict(answers))
    except (KeyError, IndexError) as exc:
        raise CampaignError(
            f"item {item_key}: rubric {rubric.name} needs {exc.args[0]!r}, "
            "which the item or its answers lack"
        ) from None


def assert_blind(data: Mapping[str, Any], forbidden: Iterable[str]) -> None:
    """Raise CampaignError if any ``forbidden`` text (a judge explanation, a raw judge reply)
    occurs in any value of a task's ``data``, nested lists and dicts included. Blank strings
    are skipped; pass texts, not bare scores, which would match any digit."""
    needles = [f for f in forbidden if f.strip()]
    for key, text in _strings(data, ""):
        for needle in needles:
            if needle in text:
                shown = needle if len(needle) <= 60 else needle[:57] + "..."
                raise CampaignError(
                    f"blind rating broken: task data {key} contains judge text {shown!r}"
                )


def _strings(value: Any, where: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _strings(inner, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list | tuple):
        for index, inner in enumerate(value):
            yield from _strings(inner, f"{where}[{index}]")


def offered_scales(data: Mapping[str, Any]) -> dict[str, Scale]:
    """Rubric name -> the scale of the score choices a rating task offered (its
    ``fj_levels_<RUBRIC>`` aliases), for the rubrics the task carries: what a pulled score
    must lie on, whatever a later version of the rubric says."""
    scales: dict[str, Scale] = {}
    for name in data.get("fj_rubrics") or []:
        options = data.get(f"fj_levels_{name}")
        try:
            numbers = sorted(int(str(o["alias"])) for o in options or [])
            scales[str(name)] = Scale.of(numbers)
        except (KeyError, TypeError, ValueError):
            continue  # not choices this module wrote: the default scale checks the score
    return scales


def parse_rating(
    result: Sequence[Mapping[str, Any]],
    *,
    expected: Collection[str] | None = None,
    scales: Mapping[str, Scale] | None = None,
) -> dict[str, RatingValue]:
    """Rubric name -> rating read from one annotation's ``result`` list.

    With ``expected`` (the task's ``fj_rubrics``), a rubric left unscored or one the task does
    not carry is an error too. A score must lie on its rubric's scale in ``scales`` (see
    ``offered_scales``), FairMonitor's 1-5 for a rubric not in it. Every problem raises
    CampaignError naming the control.
    """
    scores: dict[str, int] = {}
    rationales: dict[str, str] = {}
    for entry in result:
        name = str(entry.get("from_name"))
        kind, rubric = parse_control_name(name)
        if kind == SCORE:
            if rubric in scores:
                raise CampaignError(f"{name}: scored twice in one annotation")
            own = (scales or {}).get(rubric, SCALE)
            scores[rubric] = _score(name, _values(entry, "choices", name), own)
        else:
            text = _joined(_values(entry, "textarea", name))
            if text:
                rationales[rubric] = text
    orphans = sorted(set(rationales) - set(scores))
    if orphans:
        raise CampaignError(f"rationale given without a score for {', '.join(orphans)}")
    if expected is not None:
        missing = [r for r in expected if r not in scores]
        extra = sorted(set(scores) - set(expected))
        if missing:
            raise CampaignError(f"annotation leaves {', '.join(missing)} unscored")
        if extra:
            raise CampaignError(f"annotation scores {', '.join(extra)}, which the task lacks")
    return {r: RatingValue(s, rationales.get(r)) for r, s in scores.items()}


def _score(name: str, choices: list[Any], scale: Scale = SCALE) -> int:
    if len(choices) != 1:
        raise CampaignError(f"{name}: expected exactly one choice, got {len(choices)}")
    raw = choices[0]
    text = str(raw).strip()
    if isinstance(raw, bool) or not re.fullmatch(r"[+-]?\d+", text):
        raise CampaignError(f"{name}: choice {raw!r} is not a whole-number score")
    score = int(text)
    if score not in scale:
        raise CampaignError(f"{name}: score {score} is outside {scale}")
    return score


def _values(entry: Mapping[str, Any], kind: str, name: str) -> list[Any]:
    """The list under ``value[key]`` of a ``kind`` result ("choices" or "textarea")."""
    if entry.get("type") != kind:
        raise CampaignError(f"{name}: expected a {kind} result, got {entry.get('type')!r}")
    key = "choices" if kind == "choices" else "text"
    value = entry.get("value")
    values = value.get(key) if isinstance(value, Mapping) else None
    if not isinstance(values, list):
        raise CampaignError(f"{name}: result has no list under value.{key}")
    return values


def _joined(texts: list[Any]) -> str:
    return "\n".join(_clean(str(t)) for t in texts if str(t).strip())


def _clean(text: str) -> str:
    """Text as a browser textarea returns it: newlines as "\\n", outer whitespace trimmed."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


# -- review -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewValue:
    """An expert's review of one item; ``edits`` holds only fields whose text changed."""

    decision: str
    reason: str | None
    edits: dict[str, str]


def review_fields(stages: Sequence[str] = STAGES) -> tuple[str, ...]:
    """The item fields a review of ``stages`` shows: each stage's fields, then the optional
    ones (docs/datasets.md)."""
    unknown = [s for s in stages if s not in STAGE_FIELDS]
    if unknown or not stages:
        raise CampaignError(f"stages must be among {', '.join(STAGES)}, got {list(stages)}")
    names = [f for s in stages for f in STAGE_FIELDS[s]] + list(OPTIONAL)
    return tuple(dict.fromkeys(names))


def review_config(stages: Sequence[str] = STAGES) -> str:
    """The review interface: the item's fields, a decision, a reason, and an edit box per field
    pre-filled with its text (TextArea ``value="$..."``), shown when "edit" is chosen."""
    names = review_fields(stages)
    root = ET.Element("View")
    for name in names:
        block = _add(root, "View")
        _add(block, "Header", value=f"$fj_label_{name}", size="5")
        _add(block, "Text", name=f"field_{name}", value=f"$fj_field_{name}")
    first = f"field_{names[0]}"
    _add(root, "Header", value="Decision: accept as is, edit the texts, or reject", size="4")
    choices = _add(
        root,
        "Choices",
        name="decision",
        toName=first,
        choice="single-radio",
        required="true",
        requiredMessage="Choose accept, edit or reject.",
    )
    for decision in DECISIONS:
        _add(choices, "Choice", value=decision)
    _add(root, "Header", value="Reason (required when rejecting)", size="5")
    _add(root, "TextArea", name="reason", toName=first, rows="3", **_ONE_TEXT)
    edits = _add(
        root, "View", visibleWhen="choice-selected", whenTagName="decision", whenChoiceValue="edit"
    )
    for name in names:
        _add(edits, "Header", value=f"$fj_label_{name}", size="5")
        _add(
            edits,
            "TextArea",
            name=f"edit_{name}",
            toName=f"field_{name}",
            value=f"$fj_field_{name}",
            rows="4",
            **_ONE_TEXT,
        )
    return ET.tostring(root, encoding="unicode")


def review_task_data(
    item_key: str,
    stage: str,
    fields: Mapping[str, Any],
    campaign_key: str,
    *,
    stages: Sequence[str] = STAGES,
) -> dict[str, Any]:
    """The ``data`` of one review task; every field slot of ``review_config(stages)`` is
    present, empty where the item has no such field."""
    names = review_fields(stages)
    if stage not in stages:
        raise CampaignError(f"item {item_key}: stage {stage} is not among {', '.join(stages)}")
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise CampaignError(f"item {item_key}: fields {', '.join(unknown)} cannot be reviewed")
    data: dict[str, Any] = {
        TASK_KEY: f"{campaign_key}:{item_key}",
        "fj_item": item_key,
        "fj_stage": stage,
    }
    for name in names:
        text = fields.get(name)
        present = text is not None and str(text) != ""
        data[f"fj_label_{name}"] = name if present else ""
        data[f"fj_field_{name}"] = str(text) if present else ""
    return data


def parse_review(result: Sequence[Mapping[str, Any]], original: Mapping[str, Any]) -> ReviewValue:
    """The review in one annotation's ``result``; ``original`` holds the item's fields as
    imported, so that pre-filled boxes left unchanged are not counted as edits (texts are
    compared with newlines normalised and outer whitespace trimmed). A box emptied by the
    reviewer sends no result, so it reads as unchanged: deleting a field is not an edit."""
    known = set(review_fields(STAGES))
    decisions: list[Any] = []
    reason: str | None = None
    edits: dict[str, str] = {}
    for entry in result:
        name = str(entry.get("from_name"))
        if name == "decision":
            decisions.extend(_values(entry, "choices", name))
        elif name == "reason":
            reason = _joined(_values(entry, "textarea", name)) or None
        elif name.startswith("edit_") and name[5:] in known:
            texts = [t for t in _values(entry, "textarea", name) if str(t).strip()]
            if len(texts) > 1:
                raise CampaignError(f"{name}: {len(texts)} texts given, expected one")
            new = _clean(str(texts[0])) if texts else ""
            if new != _clean(str(original.get(name[5:], "") or "")):
                edits[name[5:]] = new
        else:
            raise CampaignError(f"review annotation has a result from unknown control {name!r}")
    if len(decisions) != 1 or decisions[0] not in DECISIONS:
        raise CampaignError(
            f"decision: expected one of {', '.join(DECISIONS)}, got {decisions or 'none'}"
        )
    decision = str(decisions[0])
    if decision == "reject" and not reason:
        raise CampaignError("decision reject needs a reason")
    if decision == "edit" and not edits:
        raise CampaignError("decision edit but no field differs from the original")
    if decision == "accept" and edits:
        raise CampaignError(
            f"decision accept but {', '.join(sorted(edits))} changed; choose edit to keep them"
        )
    return ReviewValue(decision, reason, edits)


def _add(parent: ET.Element, tag: str, **attrs: str) -> ET.Element:
    return ET.SubElement(parent, tag, attrs)
