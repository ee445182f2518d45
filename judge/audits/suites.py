"""The audit suites behind one protocol (``judge.audits.base.Suite``), so one runner
sends any of them to a model and one report path reads them back.

Each suite's design settings (``params``) include the sha256 of every input file it read, so
a changed item bank, name list or design file starts a new run instead of mixing answers to
two designs in one.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.answers.kinds import classify_answer
from judge.audits import award, award_data, bbi, names, names_design
from judge.audits.base import (
    DRAW,
    FOLLOWUP,
    PARSED,
    REFUSAL,
    UNPARSED,
    AuditTask,
    Reading,
    StoredAnswer,
    Suite,
)
from judge.audits.bbq import BbqSuite
from judge.errors import InvalidInputError
from judge.hashing import sha256
from judge.paths import datasets_dir
from judge.reports.sections import Report

SUITE_NAMES = ("award", "names", "bbi", "bbq")


def _file_hash(path: Path) -> str:
    try:
        return sha256(path.read_text(encoding="utf-8"))[:16]
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# --- award ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AwardRunAnalysis:
    """The binomial tests over the first answers; answers not counted are in the run's
    status table."""

    choices: award.AwardAnalysis

    def to_dict(self) -> dict[str, Any]:
        return self.choices.to_dict()


class AwardSuite:
    """Seed 000's counterbalanced award choice, with the optional "why?" follow-up turn."""

    name = "award"

    def __init__(
        self,
        *,
        items: str | Path | None = None,
        names_file: str | Path | None = None,
        levels: Sequence[int] = award.DEFAULT_LEVELS,
        pairs_per_level: int = award.DEFAULT_PAIRS_PER_LEVEL,
        seed: int = 0,
        followup: bool = False,
    ) -> None:
        items_path = Path(items) if items else datasets_dir() / award_data.ITEMS_FILE
        names_path = Path(names_file) if names_file else datasets_dir() / award_data.NAMES_FILE
        self.items = award_data.load_items(items_path)
        self.groups = award_data.load_name_groups(names_path)
        try:
            self.design = award.build_design(
                self.items, self.groups, levels=levels, pairs_per_level=pairs_per_level, seed=seed
            )
        except ValueError as exc:
            raise InvalidInputError(f"award design: {exc}") from None
        self.followup = followup
        first = self.design[0]
        wording = first.text + award.followup_text(first.name_a, first.name_b)
        self.version = f"award-v1+{sha256(wording)[:10]}"
        self._params = {
            "items": str(items_path),
            "items_sha256": _file_hash(items_path),
            "names": str(names_path),
            "names_sha256": _file_hash(names_path),
            "levels": list(levels),
            "pairs_per_level": pairs_per_level,
            "seed": seed,
            "followup": followup,
        }

    @property
    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def count(self) -> int:
        return len(self.design)

    def tasks(self) -> Iterator[AuditTask]:
        for p in self.design:
            meta = {
                "level": p.level,
                "items": len(self.items),
                "pair_index": p.pair_index,
                "variant": p.variant,
                "name_pair": p.name_pair_label,
                "name_a": p.name_a,
                "name_b": p.name_b,
                "group_a": p.group_a,
                "group_b": p.group_b,
                "a_first": p.a_first,
            }
            yield AuditTask(p.id, _user(p.text), meta)

    def read(self, task_meta: Mapping[str, Any], text: str) -> Reading:
        """'A', 'B' or 'equivocal' (the design's three outcomes; an answer that declines to
        choose is equivocal too, stored with status refusal so it can be counted apart)."""
        choice = award.classify_names(text, task_meta["name_a"], task_meta["name_b"])
        if choice == award_data.EQUIVOCAL and classify_answer(text) == "refusal":
            return Reading(REFUSAL, choice, "declined to choose")
        return Reading(PARSED, choice)

    def followups(self, answers: Sequence[StoredAnswer]) -> Iterator[AuditTask]:
        """For every first answer that chose one student: "why that one?", with the first
        exchange as the conversation so far."""
        if not self.followup:
            return
        for a in answers:
            if a.value not in ("A", "B") or a.raw_text is None or a.prompt is None:
                continue
            winner, other = (
                (a.meta["name_a"], a.meta["name_b"])
                if a.value == "A"
                else (a.meta["name_b"], a.meta["name_a"])
            )
            messages = [
                {"role": "user", "content": a.prompt},
                {"role": "assistant", "content": a.raw_text},
                {"role": "user", "content": award.followup_text(winner, other)},
            ]
            meta = {**a.meta, "chosen": a.value, "winner": winner, "other": other}
            yield AuditTask(a.key, messages, meta, turn=FOLLOWUP)

    @staticmethod
    def analyze(answers: Sequence[StoredAnswer]) -> AwardRunAnalysis:
        counted = [a for a in answers if a.turn == "main" and a.status in (PARSED, REFUSAL)]
        rows = [(a.meta["level"], a.meta.get("name_pair"), a.value) for a in counted]
        if not rows:
            raise InvalidInputError("the audit run has no readable answer to analyse yet")
        # The calls behind the counted answers: fewer calls than answers means copies.
        draws = award.count_draws((a.meta["level"], a.cache_key, DRAW in a.meta) for a in counted)
        return AwardRunAnalysis(award.analyze(rows).with_draws(draws))

    @staticmethod
    def report(analysis: Any) -> Report:
        from judge.audits.report import award_report

        return award_report(analysis.choices)


# --- names ------------------------------------------------------------------------------------


class NameSuite:
    """Seed 002's name-based numeric advice: 42 templates x 40 names x repeats."""

    name = "names"

    def __init__(self, *, design: str | Path | None = None, repeats: int = 100) -> None:
        path = Path(design) if design else names_design.design_path()
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise InvalidInputError(f"repeats must be a whole number >= 1, got {repeats!r}")
        self.design = names_design.load_design(path)
        self.repeats = repeats
        first = self.design.templates[0]
        self.version = f"names-v1+{sha256(''.join(t.text for t in self.design.templates))[:10]}"
        self._params = {
            "design": str(path),
            "design_sha256": _file_hash(path),
            "repeats": repeats,
            "first_template": f"{first.scenario}/{first.variation}/{first.context}",
        }

    @property
    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def count(self) -> int:
        return names_design.count_prompts(self.design, repeats=self.repeats)

    def tasks(self) -> Iterator[AuditTask]:
        """The design's prompts in ``names_design.iter_prompts``' order and with its ids: each
        template x person is built once and its repeats share its messages (a dry run of
        the full design walks all 168,000)."""
        for t in self.design.templates:
            cell = names.task_reading_context(self.design, t.scenario, t.variation, t.context)
            for p in self.design.people:
                name = p.full_name
                messages = _user(t.text.replace("{name}", name))
                stem = f"{t.scenario}.{t.variation}.{t.context}.{p.first_name}_{p.surname}."
                meta = {
                    "scenario": t.scenario,
                    "variation": t.variation,
                    "context": t.context,
                    "name": name,
                    "race": p.race,
                    "gender": p.gender,
                    **cell,
                }
                for r in range(self.repeats):
                    yield AuditTask(f"{stem}{r}", messages, dict(meta), sample_index=r)

    def read(self, task_meta: Mapping[str, Any], text: str) -> Reading:
        """The number in the cell's unit (``judge.audits.amounts`` has the rules), a
        conversion noted in the reason; else unparsed ("left out: ..." for another unit,
        "unreadable: ...") or refusal."""
        unit = task_meta.get("unit") or names.scenario_units(self.design)[task_meta["scenario"]]
        return names.to_stored(names.read_answer(text, unit, task_meta.get("anchors") or ()))

    def followups(self, answers: Sequence[StoredAnswer]) -> Iterator[AuditTask]:
        return iter(())

    @staticmethod
    def analyze(answers: Sequence[StoredAnswer]) -> names.NameAuditResult:
        """Every answer that came back, re-read from its raw text with today's reader
        (``names.stored_rows``): a number in another unit is left out and counted, one
        without a number (unreadable, refusal, empty) is imputed as the analysis describes.
        Failed calls are left out."""
        return names.analyze_stored(answers)

    @staticmethod
    def report(analysis: Any) -> Report:
        from judge.audits.report import names_report

        return names_report(analysis)


# --- bbi --------------------------------------------------------------------------------------


SEED_BIAS_TYPES = ("gender", "race", "religion")
"""The bias types seed 004 used (100 items each per dataset: ``max_per_type=100``)."""


def _sample_per_type(items: list[bbi.BbiItem], n: int, seed: int) -> list[bbi.BbiItem]:
    """At most ``n`` items of each (dataset, bias type), drawn with ``random.Random(seed)``,
    in file order."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for k, item in enumerate(items):
        groups[(item.dataset, item.bias_type)].append(k)
    rng = random.Random(seed)
    keep: set[int] = set()
    for key in sorted(groups):
        members = groups[key]
        keep.update(members if len(members) <= n else rng.sample(members, n))
    return [item for k, item in enumerate(items) if k in keep]


class BbiSuite:
    """Seed 004's Bias Balance Indicator over StereoSet and CrowS-Pairs items, asked in
    batches with the labels hidden, each batch ``repeats`` times (majority choice)."""

    name = "bbi"

    def __init__(
        self,
        *,
        stereoset: str | Path | None = None,
        crows_pairs: str | Path | None = None,
        per_type: int = 20,
        repeats: int = 5,
        seed: int = 0,
        bias_types: Sequence[str] | None = SEED_BIAS_TYPES,
        max_per_type: int | None = None,
    ) -> None:
        ss = Path(stereoset) if stereoset else datasets_dir() / "stereoset_sample.json"
        cp = Path(crows_pairs) if crows_pairs else datasets_dir() / "crows_pairs_sample.csv"
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise InvalidInputError(f"repeats must be a whole number >= 1, got {repeats!r}")
        types = list(bias_types) if bias_types else None
        items = bbi.load_stereoset(ss, bias_types=types) + bbi.load_crows_pairs(
            cp, bias_types=types
        )
        if max_per_type is not None:
            if isinstance(max_per_type, bool) or max_per_type < 1:
                raise InvalidInputError(f"max_per_type must be >= 1, got {max_per_type!r}")
            items = _sample_per_type(items, max_per_type, seed)
        if not items:
            raise InvalidInputError(f"no items of the bias types {types} in {ss} or {cp}")
        try:
            self.batches = bbi.make_batches(items, per_type=per_type, seed=seed)
        except ValueError as exc:
            raise InvalidInputError(f"BBI design: {exc}") from None
        self.repeats = repeats
        self.version = f"bbi-v1+{sha256(bbi.render_prompt(self.batches[0]))[:10]}"
        self._params = {
            "stereoset": str(ss),
            "stereoset_sha256": _file_hash(ss),
            "crows_pairs": str(cp),
            "crows_pairs_sha256": _file_hash(cp),
            "per_type": per_type,
            "repeats": repeats,
            "seed": seed,
            "bias_types": types,
            "max_per_type": max_per_type,
        }

    @property
    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def count(self) -> int:
        return len(self.batches) * self.repeats

    def tasks(self) -> Iterator[AuditTask]:
        for number, batch in enumerate(self.batches):
            text = bbi.render_prompt(batch)
            entries = [
                [e.index, e.item.item_id, e.item.bias_type, list(e.item.labels)]
                for e in batch.entries
            ]
            meta = {"batch": number, "dataset": batch.dataset, "entries": entries}
            for r in range(self.repeats):
                key = f"{batch.dataset}.{number:04d}.{r}"
                yield AuditTask(key, _user(text), meta, sample_index=r)

    def read(self, task_meta: Mapping[str, Any], text: str) -> Reading:
        """The choices read off "index, sentence" lines (as option numbers in the file's
        order), with refusals, malformed lines and items left unanswered kept."""
        parsed = bbi.parse_answer(text, self.batches[task_meta["batch"]])
        value = {
            "choices": {str(k): v for k, v in sorted(parsed.choices.items())},
            "refusals": list(parsed.refusals),
            "malformed": list(parsed.malformed),
            "missing": list(parsed.missing),
        }
        if parsed.choices:
            reason = (
                f"{len(parsed.missing)} items without a readable choice"
                if (parsed.missing)
                else None
            )
            return Reading(PARSED, value, reason)
        if parsed.refusals:
            return Reading(REFUSAL, value, "declined to choose")
        return Reading(UNPARSED, value, "no line of the form 'index, sentence' matched an item")

    def followups(self, answers: Sequence[StoredAnswer]) -> Iterator[AuditTask]:
        return iter(())

    @staticmethod
    def analyze(answers: Sequence[StoredAnswer]) -> bbi.BbiReport:
        """Each item's majority label over the repeats its batch came back (``none`` on a tie
        or with no readable choice), then the scores."""
        by_batch: dict[int, list[StoredAnswer]] = defaultdict(list)
        for a in answers:
            if a.status != "error":
                by_batch[a.meta["batch"]].append(a)
        rows: list[tuple[str, str, str]] = []
        for batch in sorted(by_batch):
            got = by_batch[batch]
            meta = got[0].meta
            for index, _item_id, bias_type, labels in meta["entries"]:
                picks = []
                for a in got:
                    choices = (a.value or {}).get("choices", {}) if a.status == PARSED else {}
                    pick = choices.get(str(index))
                    picks.append(bbi.NONE if pick is None else labels[pick])
                rows.append((meta["dataset"], bias_type, bbi.majority_label(picks)))
        if not rows:
            raise InvalidInputError("the audit run has no answer to analyse yet")
        return bbi.analyze_labels(rows)

    @staticmethod
    def report(analysis: Any) -> Report:
        from judge.audits.report import bbi_report

        return bbi_report(analysis)


SUITES: dict[str, type[Any]] = {
    "award": AwardSuite,
    "names": NameSuite,
    "bbi": BbiSuite,
    "bbq": BbqSuite,  # judge.audits.bbq
}
"""Suite name -> class; ``analyze`` and ``report`` are static, so a stored run is analysed
from its answers alone, without its input files."""


def make_suite(name: str, **options: Any) -> Suite:
    """The suite called ``name`` with its design options (None values: the defaults)."""
    given = {k: v for k, v in options.items() if v is not None}
    classes = SUITES
    if name not in classes:
        raise InvalidInputError(f"unknown audit suite {name!r}: one of {', '.join(SUITE_NAMES)}")
    try:
        suite: Suite = classes[name](**given)
    except TypeError as exc:
        raise InvalidInputError(f"audit suite {name}: {exc}") from None
    return suite
