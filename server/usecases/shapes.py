"""The domain's values and errors that the server's adapters (the HTTP models in
``server.schemas``, the error pages in ``server.errors``) name, handed over by the use cases.

The adapters reach the domain only through ``server.usecases`` (the one-door import contract
in pyproject.toml); this module is that door for plain shapes: a dataset's description, a
response row, a generation run's listing, a stage metric's row, two runs compared pair by
pair, and the errors a route turns into a status. It is imported by the adapters only, so
the CLI does not pay for it.
"""

from __future__ import annotations

from annotation.errors import LabelStudioError
from judge.data.datasets import DatasetDescription, DatasetInfo, ImportSummary
from judge.data.responses import MAX_BATCH_ROWS, ResponseRow, ResponsesImport
from judge.metrics import MetricRow
from judge.runs import RunBusyError
from judge.store.queries import GenerationRunInfo
from judge.trust.pairwise_import import PairwiseImportSummary
from server.usecases.comparisons import PairedComparison

__all__ = [
    "MAX_BATCH_ROWS",
    "DatasetDescription",
    "DatasetInfo",
    "GenerationRunInfo",
    "ImportSummary",
    "LabelStudioError",
    "MetricRow",
    "PairedComparison",
    "PairwiseImportSummary",
    "ResponseRow",
    "ResponsesImport",
    "RunBusyError",
]
