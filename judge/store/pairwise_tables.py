"""Pairwise verdicts imported from files (``fairjudge judgments import``): a judge shown two
answers to one question, in one order, said which was better (A: the one shown first, B: the
one shown second), a tie, or nothing readable.

They live in their own module rather than ``tables.py`` because a published study's records
have no dataset, generation run or judge run behind them, only labels (judge, question,
models). FairJudge's own judge writes them too (``fairjudge judge-pairs``,
``judge.grading.pairs``): one import per pairwise judge run, format ``judge-pairs``.
They sit on the same ``SQLModel.metadata`` and are created by the same migrations (revision 0019);
``judge/store/engine.py`` registers them beside ``tables.py``.

``PairwiseImport`` is one imported file (or folder of files); ``PairwiseVerdict`` one judge's
reply for one question, answer pair, order and repetition. The pair is stored as shown:
``model_first`` then ``model_second``; the same two models in the other order are the other
order of the same pair. The judge's raw reply is kept when the file gives it, so an
unreadable verdict can be read again by a person.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from judge.store.tables import utcnow

VERDICTS = ("A", "B", "tie", "unreadable")
"""What a stored verdict may be: the first-shown answer, the second, a tie, or no readable
verdict (kept, never turned into a choice)."""


class PairwiseImport(SQLModel, table=True):
    """One import: where the records came from and how many were stored."""

    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(description="The file or folder as given to the command.")
    format: str = Field(description="shi2024, csv or jsonl")
    sha256: str = Field(description="sha256 of the file's bytes (of every file, for a folder).")
    records: int
    max_cost: float | None = Field(
        default=None,
        description="A judge-pairs run's cost bound (--max-cost), kept across reruns as a "
        "judge run's is; None: no bound (and for imported records).",
    )
    created_at: datetime = Field(default_factory=utcnow)


class PairwiseVerdict(SQLModel, table=True):
    """One judge's verdict on one question's two answers shown in one order, in one
    repetition."""

    __table_args__ = (
        UniqueConstraint("judge", "question", "model_first", "model_second", "repetition"),
    )
    id: int | None = Field(default=None, primary_key=True)
    import_id: int = Field(foreign_key="pairwiseimport.id", index=True)
    judge: str = Field(index=True, description="The judge's label.")
    question: str = Field(description="The question's id in the file.")
    model_first: str = Field(description="The model whose answer was shown first (A).")
    model_second: str = Field(description="The model whose answer was shown second (B).")
    repetition: int = Field(description="Which repetition of the same judgment (from 1).")
    verdict: str = Field(description="A, B, tie or unreadable")
    category: str | None = Field(default=None, description="The question's task or category.")
    raw: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
