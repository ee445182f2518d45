"""``fairjudge audit bbq``: BBQ (Parrish et al. 2022). ``run`` asks the model under test
every item (options in a recorded random order) and stores each reply with what it was read
as; ``analyze --from-file`` scores predictions made elsewhere (the authors' UnifiedQA ones)
with the same figures, calling no model. Registered on ``audit`` by ``server.cli.audit``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, err, json_option, report_table

if TYPE_CHECKING:
    from server.cli import Context

Command = Callable[..., Any]


def _categories(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()] or None


def register(
    audit: click.Group, run_options: Command, run: Command, out_dir: Command, write: Command
) -> None:
    """Add the ``bbq`` group to ``audit``, with the options every ``SUITE run`` shares
    (``run_options``) and the way they run (``run``)."""

    @audit.group()
    def bbq() -> None:
        """BBQ, the Bias Benchmark for QA (Parrish et al. 2022): accuracy, s_DIS and s_AMB."""

    @bbq.command("run")
    @click.option(
        "--data",
        type=click.Path(),
        help="BBQ items: a .jsonl(.gz) file or a folder of them (not bundled; default: the "
        "config's [audits] bbq_data, which a --queue job reads).",
    )
    @click.option("--categories", help="Only these categories, comma-separated (e.g. Age,SES).")
    @click.option("--seed", type=int, help="Seed of each item's option order (0).")
    @run_options
    def bbq_run(
        ctx: Context, data: str | None, categories: str | None, seed: int | None, **common: Any
    ) -> None:
        """Ask the model under test every BBQ item (context, question, the three options
        lettered A-C in an order drawn per item and stored), read its reply as one option
        (the reading rule is in docs/audits.md; unreadable replies are kept as such), and
        report accuracy per context, s_DIS and s_AMB per category and overall."""
        options = {"categories": _categories(categories), "seed": seed}
        run(ctx, "bbq", options, common, {"data": data})

    @bbq.command("analyze")
    @click.option(
        "--from-file",
        "path",
        required=True,
        type=click.Path(),
        help="BBQ items with a prediction each: a .jsonl(.gz) file or a folder.",
    )
    @click.option(
        "--predictions",
        default="race",
        show_default=True,
        help="The field holding each prediction: race, arc or qonly for the "
        "authors' UnifiedQA-11B fields, else the field's name.",
    )
    @click.option("--categories", help="Only these categories, comma-separated.")
    @click.option(
        "--resamples",
        type=click.IntRange(min=100),
        default=2000,
        show_default=True,
        help="Bootstrap resamples of the template clusters.",
    )
    @click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
    @out_dir
    @json_option
    def bbq_analyze(
        path: str,
        predictions: str,
        categories: str | None,
        resamples: int,
        seed: int,
        out: str | None,
        as_json: bool,
    ) -> None:
        """Score predictions made elsewhere: accuracy per context, s_DIS and s_AMB with
        intervals (bootstrap over templates) and their n, per category and overall; items
        with no single target and predictions naming no option counted apart."""
        from server.usecases.audit_bbq import analyze_bbq_file

        found = analyze_bbq_file(
            path,
            predictions=predictions,
            categories=_categories(categories),
            resamples=resamples,
            seed=seed,
        )
        if found.note is not None:
            err().print(found.note, highlight=False, soft_wrap=True)
        write(found.report, out)
        emit(found.data, as_json, lambda _: _tables(found.report))


def _tables(report: Any) -> None:
    for section in report.sections:
        for t in section.tables:
            report_table(t, notes=True)
