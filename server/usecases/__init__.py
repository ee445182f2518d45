"""FairJudge's Python face and the one door through which the CLI, the web API, the dashboard
and the job queue reach the domain (``judge/``, ``annotation/``).

The names below are the public face, documented in docs/python.md: read the settings, open
the store, import a dataset, answer and judge it, read the report, register rubrics, start a
campaign. Each takes settings, an engine or a session and plain or typed requests, and returns
typed results; neither Flask nor click is imported here. Use cases of one area beyond the face
live in this package's modules (``server.usecases.audits``, ``.estimates``, ``.agreement``,
``.qualify``, ...), which the CLI imports as they are; a name not listed here is not promised
to stay.

The heavy parts (the stages, the model client, the reports, the reliability statistics) are
imported inside the functions that use them, so a command that only reads the store starts
quickly (tests/server/test_startup.py).
"""

from judge.config import Settings, load_settings
from judge.progress import Progress
from server.usecases.campaigns import create_campaign
from server.usecases.context import open_store, session
from server.usecases.datasets import (
    describe_dataset,
    export_dataset,
    generate_items,
    import_dataset,
    import_items_json,
    import_responses,
    list_datasets,
    plan_items,
    plan_items_dry_run,
)
from server.usecases.demo import DemoHooks, DemoResult, demo
from server.usecases.endpoints import check_endpoint, list_endpoints
from server.usecases.rendering import write_report
from server.usecases.reports import (
    Report,
    Section,
    Table,
    compare_report,
    comparison_summary,
    coverage_report,
    diagnostics_report,
    full_report,
    metrics_summary,
    run_agreement,
)
from server.usecases.requests import (
    GENERATED_DATASET,
    GenerateRequest,
    ItemCellRequest,
    ItemPlanRequest,
    JudgeRequest,
)
from server.usecases.rubrics import list_rubrics, register_rubric, registered_rubric, rubrics
from server.usecases.runs import (
    generate,
    generation_run_info,
    judge,
    judge_dry_run,
    judge_run_info,
    list_runs,
    run_metrics,
    run_status,
)
from server.usecases.trust import counterfactual_audit

__all__ = [
    "GENERATED_DATASET",
    "DemoHooks",
    "DemoResult",
    "GenerateRequest",
    "ItemCellRequest",
    "ItemPlanRequest",
    "JudgeRequest",
    "Progress",
    "Report",
    "Section",
    "Settings",
    "Table",
    "check_endpoint",
    "compare_report",
    "comparison_summary",
    "counterfactual_audit",
    "coverage_report",
    "create_campaign",
    "demo",
    "describe_dataset",
    "diagnostics_report",
    "export_dataset",
    "full_report",
    "generate",
    "generate_items",
    "generation_run_info",
    "import_dataset",
    "import_items_json",
    "import_responses",
    "judge",
    "judge_dry_run",
    "judge_run_info",
    "list_datasets",
    "list_endpoints",
    "list_rubrics",
    "list_runs",
    "load_settings",
    "metrics_summary",
    "open_store",
    "plan_items",
    "plan_items_dry_run",
    "register_rubric",
    "registered_rubric",
    "rubrics",
    "run_agreement",
    "run_metrics",
    "run_status",
    "session",
    "write_report",
]
