"""Gate results for people and for CI systems: the pass/fail table, the JSON document and
JUnit XML (one testcase per gate, a failure naming the figure and the threshold).

JUnit XML has no formal standard; the shape here is the one CI systems read in common
(Jenkins, GitLab, GitHub Actions' test reporters): ``<testsuites>`` holding one
``<testsuite>`` with ``tests`` and ``failures`` counts, a ``<testcase>`` per gate with
``classname`` and ``name``, and a ``<failure message=... type=...>`` child for a failed gate
whose text lists every figure the gate read. Written with ``xml.etree`` so that any text in a
gate's name is escaped.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from judge.reports.gate_checks import GateResult
from judge.reports.sections import Table

SUITE = "fairjudge gate"
CLASSNAME = "fairjudge.gate"
FAILURE_TYPE = "GateFailed"
TABLE_HEAD = ["#", "gate", "runs", "outcome", "found"]


def _runs(result: GateResult) -> str:
    ids = result.run_ids
    return f"{ids[1]} - {ids[0]}" if len(ids) == 2 else str(ids[0])


def gates_table(results: Sequence[GateResult], source: str) -> Table:
    """One line per gate: its number, name, run(s) (B - A for a paired gate), outcome, and
    the figure found against the threshold."""
    body = [
        [
            str(r.gate.index),
            r.gate.name,
            _runs(r),
            r.outcome.upper() if not r.passed else r.outcome,
            r.message,
        ]
        for r in results
    ]
    failed = sum(not r.passed for r in results)
    return Table(
        f"Gates of {source}: {len(results) - failed} passed, {failed} failed",
        TABLE_HEAD,
        body,
        notes=[
            "Figures in percent (a run's) or percentage points (B - A of two runs); lower and "
            "upper are the bounds of the 95 % interval the run report shows. 'no figure': "
            "there was no number to check (the reason is given), which fails the gate."
        ],
        key_columns=2,
    )


def gates_json(
    results: Sequence[GateResult], source: str, refs: Mapping[str, int]
) -> dict[str, Any]:
    """The whole verdict as one JSON document (``fairjudge gate --json``)."""
    failed = [r.gate.index for r in results if not r.passed]
    return {
        "file": source,
        "passed": not failed,
        "n_gates": len(results),
        "n_failed": len(failed),
        "failed": failed,
        "runs": dict(refs),
        "gates": [r.to_dict() for r in results],
    }


def _details(result: GateResult) -> str:
    lines = [f"{result.gate.name}: {result.message}"]
    for c in result.checks:
        shown = "" if c.number is None else f" checked {c.number:.4g}"
        interval = "" if c.low is None else f" [{c.low:.4g}, {c.high:.4g}]"
        value = "" if c.value is None else f" value {c.value:.4g}{interval}"
        verdict = "pass" if c.passed else "fail"
        note = f" ({c.note})" if c.note else ""
        lines.append(f"  {c.factor}:{value}{shown} -> {verdict}{note}")
    lines.append(f"gates file line {result.gate.line}")
    return "\n".join(lines)


def junit_xml(results: Sequence[GateResult], *, seconds: float = 0.0) -> str:
    """JUnit XML of the results (see the module docstring), as text with its declaration."""
    failures = sum(not r.passed for r in results)
    root = ET.Element(
        "testsuites",
        name=SUITE,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        time=f"{seconds:.3f}",
    )
    suite = ET.SubElement(
        root,
        "testsuite",
        name=SUITE,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{seconds:.3f}",
    )
    for r in results:
        case = ET.SubElement(
            suite, "testcase", classname=CLASSNAME, name=f"{r.gate.index}. {r.gate.name}",
            time="0",
        )  # fmt: skip
        if not r.passed:
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{r.outcome}: {r.message}",
                type=FAILURE_TYPE,
            )
            failure.text = _details(r)
        else:
            out = ET.SubElement(case, "system-out")
            out.text = r.message
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
