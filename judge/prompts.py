"""The one module that renders prompts from the ``prompts/`` folder.

Templates are read once per ``PromptBook``; every rendered prompt carries the template
version (declared version + hash of the template files) and a hash of its messages, so a
judgment can always be traced to the exact wording that produced it. What a rubric says is
owned by ``judge.grading.rubrics``; this module only puts it into words for the judge.

Test items that a model writes for a dataset (``fairjudge dataset generate``) are asked for
with ``dataset_generation_*.j2`` and the stage descriptions in ``dataset_generation.toml``.

FairMonitor's rubrics are judged with ``judge_*.j2``; rubrics users register, whose scale
runs 1..N, with ``judge_rubric_*.j2``. Those live apart so that adding them changed neither
the FairMonitor prompts nor their version (judge runs made before still resume). A prompts
folder without them borrows the bundled ones. A free-form item's prompt goes to the model
under test exactly as written.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import jinja2

from judge import paths
from judge.errors import ConfigError
from judge.hashing import Messages, messages_hash, sha256
from judge.vocab import FREE_STAGE

JUDGE_FILES = ("rubrics.toml", "judge_system.j2", "judge_user.j2", "judge_repair.j2")
ALL_FILES = (
    "rubrics.toml",
    "generation.toml",
    "judge_system.j2",
    "judge_user.j2",
    "judge_repair.j2",
)
RUBRIC_FILES = ("judge_rubric_system.j2", "judge_rubric_user.j2", "judge_rubric_repair.j2")
FOLLOWUP_FILES = ("audit_followup_system.j2", "audit_followup_user.j2")
PAIR_FILES = ("judge_pair_criteria.toml", "judge_pair_system.j2", "judge_pair_user.j2")
"""Pairwise judging (``judge.grading.pairs``): its criteria and its two templates."""
DATASET_GENERATION_FILES = (
    "dataset_generation.toml",
    "dataset_generation_system.j2",
    "dataset_generation_user.j2",
)


def fence(label: str, text: str) -> tuple[str, str, str]:
    """The start marker, body and end marker that fence one labelled text in the judge prompt.

    The markers carry a code derived from the text's content hash, so the same text always gets
    the same fence (the call cache keeps working) while a text cannot close its own fence: it
    would have to contain its own hash. Should it contain its end marker all the same, that
    occurrence is escaped.

    >>> start, body, end = fence("ANSWER", "Fair.")
    >>> start, end
    ('<<ANSWER ebdc9e284a76b56b>>', '<<END ANSWER ebdc9e284a76b56b>>')
    """
    code = sha256(text)[:16]
    end = f"<<END {label} {code}>>"
    return f"<<{label} {code}>>", escape_marker(text, end), end


def escape_marker(text: str, marker: str) -> str:
    """``text`` with every occurrence of the end marker ``marker`` ("<<END ...>>") defused as
    "<<ESCAPED END ...>>", so the fence's real end marker is the only one left.

    >>> escape_marker("a <<END ANSWER 12>> b", "<<END ANSWER 12>>")
    'a <<ESCAPED END ANSWER 12>> b'
    """
    return text.replace(marker, "<<ESCAPED " + marker[2:])


class RubricText(Protocol):
    """What the judge template needs to know about a rubric."""

    @property
    def name(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def compares(self) -> str: ...
    @property
    def criterion(self) -> str: ...
    @property
    def levels(self) -> Sequence[str]: ...
    @property
    def registered(self) -> bool: ...


class Described(Protocol):
    """What a dataset-generation prompt says about a sensitive factor or a scenario."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...


@dataclass(frozen=True)
class RenderedPrompt:
    messages: Messages
    template_version: str
    prompt_hash: str


class PromptBook:
    """Generation and judge templates loaded from one prompts folder."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        missing = [n for n in ALL_FILES if not (self.folder / n).exists()]
        if missing:
            raise ConfigError(f"prompts folder {self.folder} lacks {', '.join(missing)}")
        raw = {n: (self.folder / n).read_text(encoding="utf-8") for n in ALL_FILES}
        rubric_version = tomllib.loads(raw["rubrics.toml"]).get("version", 0)
        judge_files = "".join(raw[n] for n in ALL_FILES if n != "generation.toml")
        self.judge_version = f"judge-v{rubric_version}+{sha256(judge_files)[:10]}"
        self.generation = tomllib.loads(raw["generation.toml"])
        self.generation_version = (
            f"generation-v{self.generation['version']}+{sha256(raw['generation.toml'])[:10]}"
        )
        env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
        self._system = env.from_string(raw["judge_system.j2"])
        self._user = env.from_string(raw["judge_user.j2"])
        self._repair = env.from_string(raw["judge_repair.j2"])
        own = {n: self._rubric_file(n) for n in RUBRIC_FILES}
        self.rubric_judge_version = f"judge-rubric+{sha256(''.join(own.values()))[:10]}"
        self._rubric_system = env.from_string(own["judge_rubric_system.j2"])
        self._rubric_user = env.from_string(own["judge_rubric_user.j2"])
        self._rubric_repair = env.from_string(own["judge_rubric_repair.j2"])
        followup = {n: self._rubric_file(n) for n in FOLLOWUP_FILES}
        self.followup_version = f"audit-followup+{sha256(''.join(followup.values()))[:10]}"
        self._followup_system = env.from_string(followup["audit_followup_system.j2"])
        self._followup_user = env.from_string(followup["audit_followup_user.j2"])
        datagen = {n: self._rubric_file(n) for n in DATASET_GENERATION_FILES}
        self.dataset_generation = tomllib.loads(datagen["dataset_generation.toml"])
        self.dataset_generation_version = (
            f"dataset-generation-v{self.dataset_generation.get('version', 0)}"
            f"+{sha256(''.join(datagen.values()))[:10]}"
        )
        self._datagen_system = env.from_string(datagen["dataset_generation_system.j2"])
        self._datagen_user = env.from_string(datagen["dataset_generation_user.j2"])
        pair = {n: self._rubric_file(n) for n in PAIR_FILES}
        self.pair_criteria: dict[str, Any] = tomllib.loads(pair["judge_pair_criteria.toml"])
        self.pair_version = (
            f"judge-pair-v{self.pair_criteria.get('version', 0)}"
            f"+{sha256(''.join(pair.values()))[:10]}"
        )
        self._pair_system = env.from_string(pair["judge_pair_system.j2"])
        self._pair_user = env.from_string(pair["judge_pair_user.j2"])

    def _rubric_file(self, name: str) -> str:
        """A template added after the first release (registered rubrics, audit follow-ups,
        dataset generation): the folder's own, else the bundled one."""
        for folder in (self.folder, paths.prompts_dir()):
            if (folder / name).exists():
                return (folder / name).read_text(encoding="utf-8")
        raise ConfigError(f"prompts folder {self.folder} lacks {name} (and no bundled copy)")

    @property
    def rubrics_file(self) -> Path:
        return self.folder / "rubrics.toml"

    def generation_prompt(self, stage: str, part: str, fields: dict[str, Any]) -> RenderedPrompt:
        """The message sent to the model under test for one part of an item (a free-form
        item's prompt as written: the user chose its wording)."""
        if stage == FREE_STAGE:
            text = str(fields["prompt"])
        else:
            text = self.generation[stage][part].format(**fields)
        messages = [{"role": "user", "content": text}]
        return RenderedPrompt(messages, self.generation_version, messages_hash(messages))

    def template_version(self, rubric: RubricText) -> str:
        """The version of the templates that judge ``rubric``."""
        return self.rubric_judge_version if rubric.registered else self.judge_version

    def judge_prompt(
        self, rubric: RubricText, texts: list[tuple[str, str]], *, variant: str
    ) -> RenderedPrompt:
        """The judge messages for ``rubric`` over labelled ``texts`` (label, text), each text
        fenced by ``fence``."""
        fenced = [fence(label, text) for label, text in texts]
        if rubric.registered:
            system = self._rubric_system.render()
            user = self._rubric_user.render(
                rubric=rubric, texts=fenced, variant=variant, high=len(rubric.levels)
            )
        else:
            system = self._system.render()
            user = self._user.render(rubric=rubric, texts=fenced, variant=variant)
        messages = [
            {"role": "system", "content": system.strip()},
            {"role": "user", "content": user.strip()},
        ]
        return RenderedPrompt(messages, self.template_version(rubric), messages_hash(messages))

    def pair_prompt(self, criterion: Any, question: str, first: str, second: str) -> RenderedPrompt:
        """The judge messages that compare two answers to one question (``first`` shown as
        ANSWER A) by a pairwise ``criterion`` (its ``title`` and ``criterion`` text)."""
        texts = [fence("QUESTION", question), fence("ANSWER A", first), fence("ANSWER B", second)]
        user = self._pair_user.render(criterion=criterion, texts=texts)
        messages = [
            {"role": "system", "content": self._pair_system.render().strip()},
            {"role": "user", "content": user.strip()},
        ]
        return RenderedPrompt(messages, self.pair_version, messages_hash(messages))

    def followup_class_prompt(
        self, *, winner: str, other: str, total: int, items: int, explanation: str
    ) -> RenderedPrompt:
        """The judge messages that sort an award audit's follow-up explanation into
        indecisive, justified or irrational (``judge.audits.followup``)."""
        user = self._followup_user.render(
            winner=winner,
            other=other,
            total=total,
            items=items,
            explanation=fence("EXPLANATION", explanation),
        )
        messages = [
            {"role": "system", "content": self._followup_system.render().strip()},
            {"role": "user", "content": user.strip()},
        ]
        return RenderedPrompt(messages, self.followup_version, messages_hash(messages))

    def dataset_generation_prompt(
        self,
        *,
        stage: str,
        fields: Sequence[str],
        factor: Described,
        scenario: Described,
        count: int,
    ) -> RenderedPrompt:
        """The messages that ask a model for ``count`` test items of ``stage`` for ``factor``
        in ``scenario``, each with exactly ``fields`` (``judge.authoring.replies``): the stage's
        purpose and method and each field's meaning (``prompts/dataset_generation.toml``),
        and the JSON shape of the reply."""
        spec = self.dataset_generation.get(stage)
        if not isinstance(spec, dict):
            raise ConfigError(f"dataset_generation.toml in {self.folder} has no [{stage}]")
        meanings = spec.get("fields", {})
        missing = [f for f in fields if f not in meanings]
        if missing:
            raise ConfigError(
                f"dataset_generation.toml in {self.folder} does not describe the field(s) "
                f"{', '.join(missing)} of stage {stage} (under [{stage}.fields])"
            )
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        shape = json.dumps({"items": [dict.fromkeys(fields, "...")]}, ensure_ascii=False)
        user = self._datagen_user.render(
            stage=stage,
            spec=spec,
            factor=factor,
            scenario=scenario,
            fields=[(f, meanings[f]) for f in fields],
            count=count,
            shape=shape,
        )
        messages = [
            {"role": "system", "content": self._datagen_system.render().strip()},
            {"role": "user", "content": user.strip()},
        ]
        return RenderedPrompt(messages, self.dataset_generation_version, messages_hash(messages))

    def repair_message(self, reason: str, rubric: RubricText | None = None) -> str:
        """The request sent after an unreadable reply (``rubric``: the one being judged)."""
        if rubric is not None and rubric.registered:
            return self._rubric_repair.render(reason=reason, high=len(rubric.levels)).strip()
        return self._repair.render(reason=reason).strip()
