"""The use cases: the one door through which the CLI, the web API, the dashboard and the job
queue reach the domain (``judge/``, ``annotation/``). Each function takes settings or a session
and plain or typed requests, and returns typed results; neither Flask nor click is imported here.

The heavy parts (the stages, the model client, the reports, the reliability statistics) are
imported inside the functions that use them, so a command that only reads the store starts
quickly (tests/server/test_startup.py).
"""

from judge.progress import Progress
from server.usecases.campaigns import create_campaign
from server.usecases.context import (
    labelstudio,
    make_client,
    open_store,
    run_prices,
    session,
)
from server.usecases.datasets import (
    describe_dataset,
    export_dataset,
    generate_items,
    import_dataset,
    import_items_json,
    import_responses,
    item_catalogue,
    list_datasets,
    plan_items,
    plan_items_dry_run,
)
from server.usecases.demo import (
    DEMO_ITEMS_PER_STAGE,
    DemoHooks,
    DemoResult,
    DemoStep,
    DemoSubset,
    demo,
    demo_subset,
    seconds_text,
)
from server.usecases.endpoints import check_endpoint, list_endpoints
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
    job_counts,
    judge,
    judge_dry_run,
    judge_run_info,
    judgment_counts,
    list_runs,
    preload_runners,
    run_metrics,
    run_status,
    summary_line,
)
from server.usecases.servers import ensure_embedded
from server.usecases.trust import counterfactual_audit, swap_kinds

__all__ = [
    "DEMO_ITEMS_PER_STAGE",
    "DemoHooks",
    "DemoResult",
    "DemoStep",
    "DemoSubset",
    "GENERATED_DATASET",
    "GenerateRequest",
    "ItemCellRequest",
    "ItemPlanRequest",
    "JudgeRequest",
    "Progress",
    "Report",
    "Section",
    "Table",
    "check_endpoint",
    "compare_report",
    "comparison_summary",
    "counterfactual_audit",
    "coverage_report",
    "create_campaign",
    "demo",
    "demo_subset",
    "describe_dataset",
    "diagnostics_report",
    "ensure_embedded",
    "export_dataset",
    "full_report",
    "generate",
    "generate_items",
    "generation_run_info",
    "import_dataset",
    "import_items_json",
    "import_responses",
    "item_catalogue",
    "job_counts",
    "judge",
    "judge_dry_run",
    "judge_run_info",
    "judgment_counts",
    "labelstudio",
    "list_datasets",
    "list_endpoints",
    "list_rubrics",
    "list_runs",
    "make_client",
    "metrics_summary",
    "open_store",
    "plan_items",
    "plan_items_dry_run",
    "preload_runners",
    "register_rubric",
    "registered_rubric",
    "rubrics",
    "run_agreement",
    "run_metrics",
    "run_prices",
    "run_status",
    "seconds_text",
    "session",
    "summary_line",
    "swap_kinds",
]
