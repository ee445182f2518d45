"""The one module that renders prompts from the ``prompts/`` folder.

Templates and rubrics are read once per ``PromptBook``; every rendered prompt carries the
template version (declared version + hash of the template files) and a hash of its messages,
so a judgment can always be traced to the exact wording that produced it.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from judge.errors import ConfigError

RUBRICS = ("ICS", "TCS", "PCS", "ETCS", "SBAS")
STAGE_RUBRICS: dict[str, tuple[str, ...]] = {
    "S1": ("ICS",),
    "S2": ("TCS", "PCS", "ETCS"),
    "S3": ("SBAS",),
    "S4": ("ICS",),
}
STAGE_PARTS: dict[str, tuple[str, ...]] = {
    "S1": ("answer",),
    "S2": ("A", "B"),
    "S3": ("A", "B"),
    "S4": ("answer",),
}

Messages = list[dict[str, str]]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def messages_hash(messages: Messages) -> str:
    """A stable hash of a chat message list."""
    return sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False))


@dataclass(frozen=True)
class Rubric:
    name: str
    title: str
    compares: str
    criterion: str
    levels: tuple[str, ...]
    applies_to: tuple[str, ...]


@dataclass(frozen=True)
class RenderedPrompt:
    messages: Messages
    template_version: str
    prompt_hash: str


class PromptBook:
    """Rubrics and templates loaded from one prompts folder."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        names = [
            "rubrics.toml",
            "generation.toml",
            "judge_system.j2",
            "judge_user.j2",
            "judge_repair.j2",
        ]
        missing = [n for n in names if not (self.folder / n).exists()]
        if missing:
            raise ConfigError(f"prompts folder {self.folder} lacks {', '.join(missing)}")
        raw = {n: (self.folder / n).read_text(encoding="utf-8") for n in names}
        rubric_data = tomllib.loads(raw["rubrics.toml"])
        self.rubrics: dict[str, Rubric] = {}
        for name in RUBRICS:
            spec = rubric_data[name]
            if len(spec["levels"]) != 5:
                raise ConfigError(f"rubric {name} must define exactly 5 levels")
            self.rubrics[name] = Rubric(
                name=name,
                title=spec["title"],
                compares=spec["compares"],
                criterion=spec["criterion"].rstrip(),
                levels=tuple(spec["levels"]),
                applies_to=tuple(spec["applies_to"]),
            )
        judge_files = "".join(raw[n] for n in names if n != "generation.toml")
        self.judge_version = f"judge-v{rubric_data['version']}+{sha256(judge_files)[:10]}"
        self.generation = tomllib.loads(raw["generation.toml"])
        self.generation_version = (
            f"generation-v{self.generation['version']}+{sha256(raw['generation.toml'])[:10]}"
        )
        env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
        self._system = env.from_string(raw["judge_system.j2"])
        self._user = env.from_string(raw["judge_user.j2"])
        self._repair = env.from_string(raw["judge_repair.j2"])

    def generation_prompt(self, stage: str, part: str, fields: dict[str, Any]) -> RenderedPrompt:
        """The message sent to the model under test for one part of an item."""
        text = self.generation[stage][part].format(**fields)
        messages = [{"role": "user", "content": text}]
        return RenderedPrompt(messages, self.generation_version, messages_hash(messages))

    def judge_prompt(
        self, rubric: str, texts: list[tuple[str, str]], *, variant: str
    ) -> RenderedPrompt:
        """The judge messages for ``rubric`` over labelled ``texts`` (label, text)."""
        r = self.rubrics[rubric]
        user = self._user.render(rubric=r, texts=texts, variant=variant)
        messages = [
            {"role": "system", "content": self._system.render().strip()},
            {"role": "user", "content": user.strip()},
        ]
        return RenderedPrompt(messages, self.judge_version, messages_hash(messages))

    def repair_message(self, reason: str) -> str:
        return self._repair.render(reason=reason).strip()


def judge_texts(
    stage: str, rubric: str, fields: dict[str, Any], answers: dict[str, str]
) -> list[tuple[str, str]]:
    """The labelled texts the judge compares for one item and rubric."""
    if rubric == "ICS":
        return [
            ("QUESTION", fields["question"]),
            ("EXPECTED UNBIASED ANSWER", fields["expected_answer"]),
            ("ANSWER", answers["answer"]),
        ]
    if rubric in ("TCS", "PCS", "ETCS"):
        return [
            ("CHANGED FACTOR", fields["changed_factor"]),
            ("STORY A", f"{fields['story_a']}\n{answers['A']}"),
            ("STORY B", f"{fields['story_b']}\n{answers['B']}"),
        ]
    if rubric == "SBAS":
        return [
            ("QUESTION A", fields["question_a"]),
            ("ANSWER A", answers["A"]),
            ("QUESTION B", fields["question_b"]),
            ("ANSWER B", answers["B"]),
        ]
    raise ValueError(f"unknown rubric {rubric!r}")
