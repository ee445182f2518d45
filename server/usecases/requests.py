"""One typed request per use case: what the CLI builds from its options, a job stores as its
parameters (``to_params``) and rebuilds them from, and the dashboard's job form parses into.

A request names what to work on and the settings it overrides for this call (``OVERRIDES``:
field -> dotted config key, the one copy of that mapping); ``apply_overrides`` puts them on
the loaded settings, validated as the config file would be. The CLI loads the config with
the same overrides (``request_overrides``) so that a bad value is blamed on its option.

Bounds of the override fields are the config's own (``judge.config``): whatever the config
accepts, the CLI, the job API and the dashboard accept, and nothing more. Fields a job must
not carry (``NOT_FOR_JOBS``: a dry run sends nothing, ``new`` would start yet another run
each time a crashed job is resumed) are refused by the job queue and never stored.

Stored job parameters from before these models keep loading: every old key kept its name
and meaning, and the new ones (``aggregation``, ``max_cost``) are optional.

``max_cost`` is one meaning everywhere: the most a run may spend at its endpoint's prices
(``input_price_per_mtok``, ``output_price_per_mtok``; refused without them); no call goes out
once the next could pass it, and the run stops ``incomplete`` with what it finished stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from server.usecases.audit_requests import (
    SUITE_OPTIONS,
    AuditClassifyRequest,
    AuditRequest,
    AwardOptions,
    BbiOptions,
    BbqOptions,
    NamesOptions,
    suite_inputs,
)
from server.usecases.request_base import (
    MAX_ID,
    NumbersNotBooleans,
    Request,
    apply_overrides,
    problems_of,
)
from server.usecases.transport import (
    JudgeTransport,
    Transport,
    batch_refuses_max_cost,
    transport_help,
)

__all__ = [
    "GENERATED_DATASET",
    "JOB_REQUESTS",
    "MAX_ID",
    "PROMPT_VARIANTS",
    "SUITE_OPTIONS",
    "SWAP_KINDS",
    "AuditClassifyRequest",
    "AuditRequest",
    "AwardOptions",
    "BbiOptions",
    "BbqOptions",
    "CounterfactualRequest",
    "DiagnosticsRequest",
    "GenerateRequest",
    "ItemCellRequest",
    "ItemOptions",
    "ItemPlanRequest",
    "JudgePairsRequest",
    "JudgeRequest",
    "NamesOptions",
    "NumbersNotBooleans",
    "PullRequest",
    "Request",
    "SweepRequest",
    "apply_overrides",
    "problems_of",
    "suite_inputs",
]


# -- runs -----------------------------------------------------------------------------------


class JudgeRequest(Request):
    """Judge a generation run's answers (resumes the judge run with the same settings)."""

    OVERRIDES: ClassVar[dict[str, str]] = {
        "endpoint": "judge.endpoint",
        "prompt_variant": "judge.prompt_variant",
        "temperature": "judge.temperature",
        "samples": "judge.samples",
        "aggregation": "judge.aggregation",
    }
    NOT_FOR_JOBS: ClassVar[dict[str, str]] = {
        "dry_run": "a job always runs; POST /jobs/dry-run (or `fairjudge judge --dry-run`) says "
        "what it would cost",
    }

    generation_run_id: int = Field(ge=1, le=MAX_ID, description="The answers to judge.")
    endpoint: str | None = Field(
        default=None, description="Judge endpoint's name (default: [judge] endpoint)."
    )
    prompt_variant: Literal["plain", "cot"] | None = Field(
        default=None, description="Judge prompt variant (default: [judge] prompt_variant)."
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    samples: int | None = Field(default=None, ge=1, le=50, description="Judge samples per item.")
    aggregation: Literal["mean", "majority", "logprob"] | None = Field(
        default=None,
        description="How samples combine (default: [judge] aggregation); logprob needs an "
        "endpoint that returns log-probabilities.",
    )
    rubric_set: str | None = Field(
        default=None,
        description="'fairmonitor' (the default) or registered rubric names, comma-separated.",
    )
    swap_order: bool | None = Field(
        default=None,
        description="Judge every pair (TCS, PCS, ETCS, SBAS) in both orders (order bias).",
    )
    max_cost: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Stop before spending more, at the judge endpoint's prices (refused "
        "without them).",
    )
    dry_run: bool = Field(default=False, description="Only say what it would send and cost.")
    transport: JudgeTransport | None = Field(default=None, description=transport_help)

    @model_validator(mode="after")
    def _batch_and_budget(self) -> JudgeRequest:
        return batch_refuses_max_cost(self, "judge")


class GenerateRequest(Request):
    """Ask the model under test for a dataset's answers (resumes a run with these settings)."""

    OVERRIDES: ClassVar[dict[str, str]] = {
        "endpoint": "generation.endpoint",
        "temperature": "generation.temperature",
        "max_tokens": "generation.max_tokens",
    }
    NOT_FOR_JOBS: ClassVar[dict[str, str]] = {
        "new": "a job resumes its run; a new run would start again each time it is resumed",
        "dry_run": "a job always runs; POST /jobs/dry-run (or `fairjudge generate --dry-run`) "
        "says what it would cost",
    }

    dataset: str = Field(min_length=1, description="The dataset's name.")
    endpoint: str | None = Field(
        default=None, description="Model under test (default: [generation] endpoint)."
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, description="Longest answer, in tokens.")
    limit: int | None = Field(default=None, ge=1, description="Only the first N items.")
    accepted_only: bool = Field(default=False, description="Only items experts accepted.")
    include_drafts: bool = Field(
        default=False,
        description="Also generated items waiting for review (drafts); rejected items are "
        "never asked.",
    )
    new: bool = Field(
        default=False, description="A new run even if one with these settings exists."
    )
    max_cost: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Stop before spending more, at the endpoint's prices (refused without them).",
    )
    dry_run: bool = Field(default=False, description="Only say what it would send and cost.")
    transport: Transport | None = Field(default=None, description=transport_help)

    @model_validator(mode="after")
    def _batch_and_budget(self) -> GenerateRequest:
        return batch_refuses_max_cost(self, "generate")


# -- items a model writes -------------------------------------------------------------------


GENERATED_DATASET = "generated"


class ItemOptions(Request):
    """What ``dataset generate`` and ``dataset plan`` share: who writes, where items go, and
    how each call asks (unset: the authoring defaults). The ranges of ``items_per_call``,
    ``temperature`` and ``max_tokens`` are checked by ``judge.authoring.cells.Options``,
    whose messages name the option; the same ranges are declared here for the API."""

    NOT_FOR_JOBS: ClassVar[dict[str, str]] = {
        "taxonomy_file": "a job reads no file from the server's disk; the bundled taxonomy "
        "only (use `fairjudge dataset plan --taxonomy` for one of your own)"
    }

    endpoint: str = Field(min_length=1, description="Endpoint that writes the items.")
    into: str = Field(default=GENERATED_DATASET, min_length=1, description="Dataset to fill.")
    taxonomy_file: Path | None = Field(
        default=None,
        description="A TOML file of one's own factors and scenarios, added to the built-in ones.",
    )
    items_per_call: int | None = Field(
        default=None, ge=1, le=50, description="Items one call asks for (5)."
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature (0.9)."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=16,
        le=1_000_000,
        description="Longest reply (default 400 per item a call asks for).",
    )


class ItemCellRequest(ItemOptions):
    """``count`` new items of one stage x factor x scenario cell (names checked by the
    taxonomy, before any call)."""

    stage: str
    factor: str
    scenario: str
    count: int = Field(default=5, ge=1, le=100_000, description="New items to write.")


class ItemPlanRequest(ItemOptions):
    """Fill every chosen stage x factor x scenario cell up to ``per_cell`` items (empty
    choices: all of them); resumable."""

    NOT_FOR_JOBS: ClassVar[dict[str, str]] = {
        **ItemOptions.NOT_FOR_JOBS,
        "dry_run": "a job always runs",
    }

    per_cell: int = Field(ge=1, le=100_000, description="Items each cell should hold.")
    stages: list[str] = Field(default_factory=list, description="Stages (S1-S4; none: all).")
    factors: list[str] = Field(default_factory=list, description="Factors (none: all).")
    scenarios: list[str] = Field(
        default_factory=list, description="Scenarios (none: each factor's all)."
    )
    dry_run: bool = Field(default=False, description="Only say what it would send and cost.")


# -- campaigns and audits (jobs) ------------------------------------------------------------


class PullRequest(Request):
    """Bring a Label Studio campaign's ratings into the store."""

    campaign: str = Field(min_length=1, description="The campaign's name.")


class JudgePairsRequest(Request):
    """Compare generation runs' answers pairwise with the judge, in both orders, each pair of
    runs one pairwise judge run (``fairjudge judge-pairs``); resumable and cached."""

    OVERRIDES: ClassVar[dict[str, str]] = {"endpoint": "judge.endpoint"}
    NOT_FOR_JOBS: ClassVar[dict[str, str]] = {
        "dry_run": "a job always runs; POST /jobs/dry-run (or `fairjudge judge-pairs "
        "--dry-run`) says what it would cost",
    }

    runs: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        min_length=2, max_length=20, description="Two generation runs or more, each once."
    )
    criterion: str = Field(
        default="overall",
        max_length=100,
        description="What the judge compares (prompts/judge_pair_criteria.toml: overall, "
        "fairness); another criterion is another judge.",
    )
    repeats: int = Field(default=1, ge=1, le=20, description="Verdicts per pair and order.")
    endpoint: str | None = Field(default=None, description=JudgeRequest.model_fields[
        "endpoint"].description)  # fmt: skip
    max_cost: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="The most all the pairs may "
        "spend, at the judge endpoint's prices (refused without them).",
    )  # fmt: skip
    dry_run: bool = Field(default=False, description="Only say what it would send and cost.")

    @field_validator("runs", mode="before")
    @classmethod
    def _two_distinct(cls, value: Any) -> Any:
        if isinstance(value, list) and (len(value) < 2 or len(set(map(str, value))) != len(value)):
            raise PydanticCustomError(
                "pair_runs", "judge-pairs needs two generation runs or more, each once; got "
                "{got}", {"got": str(value)},
            )  # fmt: skip
        return value


# -- the judge's own checks -----------------------------------------------------------------


class DiagnosticsRequest(Request):
    """``fairjudge checks show``'s options (the API's query and the checks page read
    them with these bounds and defaults)."""

    tolerance: float = Field(
        default=0.0,
        ge=0,
        le=4,
        description="Flag only a shift whose mean size exceeds this (besides being significant).",
    )
    margin: float = Field(
        default=0.25,
        gt=0,
        le=4,
        description="Counterfactual equivalence margin in score points: a row not flagged is "
        "'no shift larger than MARGIN' when two one-sided tests rule out a larger one.",
    )


SWAP_KINDS = ("names", "gender", "race", "all")


class CounterfactualRequest(Request):
    """Judge a copy of a judge run's answers with sensitive words swapped, with the run's own
    judge and settings (``fairjudge checks counterfactual``); resumable."""

    NOT_FOR_JOBS: ClassVar[dict[str, str]] = {
        "swaps_file": "a job reads no file from the server's disk; the bundled swap list only "
        "(use `fairjudge checks counterfactual --swaps` for one of your own)",
        "dry_run": "a job always runs; POST /jobs/dry-run (or `fairjudge checks "
        "counterfactual --dry-run`) says what it would cost",
    }

    judge_run_id: int = Field(ge=1, le=MAX_ID, description="The judge run to check.")
    swap: list[Literal["names", "gender", "race", "all"]] = Field(
        min_length=1,
        max_length=len(SWAP_KINDS),
        description="Words to swap: first names across groups, gendered words, group words, "
        "or all.",
    )
    swaps_file: Path | None = Field(
        default=None, description="A swap list of one's own (KIND WORD WORD per line)."
    )
    swap_in: Literal["answers", "questions", "both"] = Field(
        default="both",
        description="Where to swap the words: in the answers, in the questions (the item's "
        "texts the judge is shown beside the answers), or both.",
    )
    limit: int | None = Field(
        default=None, ge=1, le=MAX_ID, description="Only the first N items with a swap."
    )
    max_cost: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Stop before spending more, at the judge endpoint's prices (refused "
        "without them).",
    )
    dry_run: bool = Field(default=False, description="Only say what it would send and cost.")


PROMPT_VARIANTS: tuple[Literal["plain", "cot"], ...] = ("plain", "cot")


class SweepRequest(Request):
    """Judge a generation run under every temperature x prompt variant, each a judge run of its
    own (``fairjudge sweep``); resumable and cached."""

    OVERRIDES: ClassVar[dict[str, str]] = {
        "endpoint": "judge.endpoint",
        "samples": "judge.samples",
    }

    generation_run_id: int = Field(ge=1, le=MAX_ID, description="The answers to judge.")
    temperatures: list[Annotated[float, Field(ge=0, le=2)]] = Field(
        default_factory=lambda: [0.1, 0.5, 1.0],
        min_length=1,
        max_length=20,
        description="Judge temperatures.",
    )
    prompt_variants: list[Literal["plain", "cot"]] = Field(
        default_factory=lambda: list(PROMPT_VARIANTS),
        min_length=1,
        max_length=2,
        description="Prompt variants.",
    )
    samples: int | None = Field(default=None, ge=1, le=50, description="Judge samples per item.")
    endpoint: str | None = Field(
        default=None, description="Judge endpoint's name (default: [judge] endpoint)."
    )


JOB_REQUESTS: dict[str, type[Request]] = {
    "judge": JudgeRequest,
    "generate": GenerateRequest,
    "pull": PullRequest,
    "audit": AuditRequest,
    "audit-classify": AuditClassifyRequest,
    "item-plan": ItemPlanRequest,
    "item-generate": ItemCellRequest,
    "counterfactual": CounterfactualRequest,
    "sweep": SweepRequest,
    "judge-pairs": JudgePairsRequest,
}
"""Every kind of job and the request it stores (server/jobs/tasks.py runs them)."""
