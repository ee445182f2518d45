"""The form that starts a job of any kind, generated from the kind's request model
(``server.usecases.requests.JOB_REQUESTS``): one input per field the model declares (those a
job may not carry, ``NOT_FOR_JOBS``, left out), its widget from the field's type, its bounds
and help from the field's constraints and description. A field added to a request appears in
the form the day it is added; a field removed disappears. No Flask here.

The form posts back into the same request: each value read by its field's type, then
validated by the model (``job_request``), as the CLI's options and the API's parameters are.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from judge.errors import InvalidInputError
from server.usecases.gates import DRY_RUNS, GATED, ConfirmationNeeded, JobSize, dry_run
from server.usecases.jobs import job_request
from server.usecases.requests import JOB_REQUESTS

__all__ = [
    "JOB_REQUESTS",
    "Choices",
    "ConfirmationNeeded",
    "Figure",
    "FormField",
    "JobForm",
    "job_form",
    "job_form_fields",
    "parse",
    "gate",
    "dry_run_figure",
]

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from server.usecases.requests import Request

Widget = Literal["select", "number", "checkbox", "text", "list", "checkboxes", "json"]
Choices = Callable[[], list[tuple[str, str]]]
"""(value, label) pairs a field's select offers, read when the form is drawn."""


@dataclass(frozen=True)
class FormField:
    """One input: its name (the request field's), widget, whether it must be filled, help,
    bounds, the choices of a select, and the value shown."""

    name: str
    widget: Widget
    required: bool
    help: str
    value: str | list[str] = ""
    choices: list[tuple[str, str]] = field(default_factory=list)
    minimum: str = ""
    maximum: str = ""
    step: str = ""
    placeholder: str = ""
    integer: bool = False

    @property
    def label(self) -> str:
        return self.name.replace("_", " ")


@dataclass(frozen=True)
class JobForm:
    kind: str
    kinds: list[str]
    about: str
    fields: list[FormField]
    dry_run: bool = False
    """Whether the kind has a dry run (the form offers a button that shows it)."""


def _bare(annotation: Any) -> tuple[Any, bool]:
    """The annotation without ``None`` and whether None was allowed."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        allowed = len(args) < len(typing.get_args(annotation))
        return (args[0] if len(args) == 1 else annotation), allowed
    return annotation, False


def _bounds(info: FieldInfo) -> dict[str, str]:
    out = {}
    for meta in info.metadata:
        for attr, key in (
            ("ge", "minimum"),
            ("gt", "minimum"),
            ("le", "maximum"),
            ("lt", "maximum"),
        ):
            if getattr(meta, attr, None) is not None:
                out[key] = f"{getattr(meta, attr):g}"
    return out


def describe(
    name: str,
    info: FieldInfo,
    *,
    value: str | list[str],
    choices: Mapping[str, Choices],
    placeholder: str = "",
) -> FormField:
    """The input for request field ``name``: select for a choice (a Literal, or a field with
    ``choices``), checkbox for a flag, number for a number, checkboxes for a list of choices,
    comma-separated text for other lists, JSON for a mapping, text otherwise."""
    annotation, _ = _bare(info.annotation)
    required = info.is_required()
    about = (info.description or "").strip()
    origin = typing.get_origin(annotation)
    blank = [] if required else [("", placeholder or "default")]
    if origin is Literal:
        options = [(str(v), str(v)) for v in typing.get_args(annotation)]
        return FormField(name, "select", required, about, value, blank + options)
    if _modes(annotation):  # a choice carried as a model (the transport): a select of modes
        offered = choices[name]() if name in choices else [(m, m) for m in _modes(annotation)]
        return FormField(name, "select", required, about, value, blank + offered)
    if name in choices:
        found = choices[name]()
        return FormField(
            name, "select", required, about, value, blank + found, integer=annotation is int
        )
    if annotation is bool:
        return FormField(name, "checkbox", False, about, value)
    if annotation in (int, float):
        step = "1" if annotation is int else "any"
        bounds = _bounds(info)
        return FormField(
            name,
            "number",
            required,
            about,
            value,
            step=step,
            placeholder=placeholder,
            integer=annotation is int,
            minimum=bounds.get("minimum", ""),
            maximum=bounds.get("maximum", ""),
        )
    if origin is list:
        (inner,) = typing.get_args(annotation) or (str,)
        if typing.get_origin(inner) is Literal:
            options = [(str(v), str(v)) for v in typing.get_args(inner)]
            return FormField(name, "checkboxes", required, about, value, options)
        return FormField(
            name,
            "list",
            required,
            about + " Comma-separated.",
            value,
            placeholder=placeholder,
            integer=inner is int,
        )
    if origin is dict or annotation is dict:
        return FormField(
            name, "json", required, about + " A JSON object.", value or "", placeholder="{}"
        )
    return FormField(name, "text", required, about, value, placeholder=placeholder)


def _modes(annotation: Any) -> list[str]:
    """The modes of a request field that is a model with a ``mode`` choice (the transport:
    live or batch), posted as the mode alone; [] for any other field."""
    fields = getattr(annotation, "model_fields", None)
    mode = fields.get("mode") if isinstance(fields, dict) else None
    if mode is None or typing.get_origin(mode.annotation) is not Literal:
        return []
    return [str(v) for v in typing.get_args(mode.annotation)]


def job_fields(kind: str) -> dict[str, FieldInfo]:
    """The fields a job of ``kind`` may carry, in the request's order."""
    model = JOB_REQUESTS[kind]
    return {n: f for n, f in model.model_fields.items() if n not in model.NOT_FOR_JOBS}


def job_form_fields(kind: str, choices: Mapping[str, Choices] | None = None) -> list[FormField]:
    """The inputs of ``kind``'s form, empty (``choices``: what the selects offer)."""
    return [
        describe(name, info, value="", choices=choices or {})
        for name, info in job_fields(kind).items()
    ]


def _config_value(settings: Settings, dotted: str) -> str:
    section, key = dotted.split(".")
    value = getattr(getattr(settings, section), key)
    return f"{value:g}" if isinstance(value, float) else str(value)


def job_form(
    kind: str,
    settings: Settings,
    sent: Mapping[str, Any],
    choices: Mapping[str, Choices],
) -> JobForm:
    """The form of ``kind``'s request, filled with ``sent`` (a resubmission, or a link's
    query) over the config's values for the fields that override the config."""
    if kind not in JOB_REQUESTS:
        raise InvalidInputError(f"unknown job kind {kind!r}: use one of {', '.join(JOB_REQUESTS)}")
    model: type[Request] = JOB_REQUESTS[kind]
    overrides = model.OVERRIDES
    getlist = getattr(sent, "getlist", None)
    fields = []
    for name, info in job_fields(kind).items():
        config = _config_value(settings, overrides[name]) if name in overrides else ""
        value: str | list[str]
        if getlist is not None and (typing.get_origin(_bare(info.annotation)[0]) is list):
            value = [v for v in getlist(name) if v]
        else:
            value = str(sent.get(name, config) or "")
        hint = f"config: {config}" if config else ""
        fields.append(describe(name, info, value=value, choices=choices, placeholder=hint))
    about = (model.__doc__ or "").strip().split("\n\n", 1)[0].replace("\n", " ")
    return JobForm(kind, list(JOB_REQUESTS), about, fields, dry_run=kind in DRY_RUNS)


def _number(name: str, text: str, integer: bool, problems: list[str]) -> Any:
    try:
        return int(text) if integer else float(text)
    except ValueError:
        problems.append(f"{name}: {text!r} is not {'an integer' if integer else 'a number'}")
        return None


def parse(kind: str, form: Mapping[str, Any], choices: Mapping[str, Choices]) -> Request:
    """``kind``'s request from the posted form: each value read by its field's widget (a
    blank optional field is left out: the config's value or the request's default), then
    validated by the request model. InvalidInputError names every field that cannot be read,
    then every value the request refuses."""
    getlist = getattr(form, "getlist", lambda name: [form[name]] if name in form else [])
    problems: list[str] = []
    given: dict[str, Any] = {}
    no_choices: dict[str, Choices] = {name: list for name in choices}
    for name, info in job_fields(kind).items():
        f = describe(name, info, value="", choices=no_choices)
        text = str(form.get(name, "")).strip()
        if f.widget == "checkbox":
            if text:
                given[name] = True
        elif f.widget == "checkboxes":
            picked = [v for v in getlist(name) if v]
            if picked:
                given[name] = picked
        elif not text:
            if f.required:
                problems.append(
                    f"{name}: choose one" if f.widget == "select" else f"{name}: fill it in"
                )
        elif _modes(_bare(info.annotation)[0]):
            given[name] = {"mode": text}
        elif f.widget == "number" or (f.widget == "select" and f.integer):
            number = _number(name, text, f.integer, problems)
            if number is not None:
                given[name] = number
        elif f.widget == "list":
            parts = [p.strip() for p in text.split(",") if p.strip()]
            if f.integer:
                parsed = [_number(name, p, True, problems) for p in parts]
                given[name] = [p for p in parsed if p is not None]
            else:
                given[name] = parts
        elif f.widget == "json":
            try:
                given[name] = json.loads(text)
            except ValueError as exc:
                problems.append(f"{name}: not JSON ({exc})")
        else:
            given[name] = text
    if problems:
        raise InvalidInputError(f"the {kind} job form has errors: " + "; ".join(problems))
    return job_request(kind, given)


# -- the figure before a job starts ---------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """A job's dry run as the form shows it: the line (calls, tokens, cost), the rows of the
    estimate, and when the form asks before it starts, why (the limits it is over) and the
    calls its button accepts."""

    line: str
    rows: list[tuple[str, str]]
    over: list[str]
    calls: int

    @property
    def asking(self) -> bool:
        return bool(self.over)

    @classmethod
    def of(cls, size: JobSize, over: list[str]) -> Figure:
        rows: list[tuple[str, str]] = []
        reply = size.reply
        for key in ("prompts", "judgments_to_make", "cached_calls", "calls_to_send"):
            if isinstance(reply.get(key), int):
                rows.append((key.replace("_", " "), f"{reply[key]:,}"))
        for name, part in (
            ("", reply.get("estimate")),
            ("follow-up ", reply.get("followup_estimate")),
        ):
            if not isinstance(part, dict):
                continue
            rows.append((f"{name}prompt tokens", f"{part.get('prompt_tokens', 0):,}"))
            cacheable = part.get("cached_prompt_tokens") or 0
            if cacheable:
                rows.append((f"{name}prompt tokens a prompt cache could serve", f"{cacheable:,}"))
            labels = [("live", ""), ("batch price", "_batch")]
            if part.get("cost_max_cached") is not None:
                labels.append(("live, cache serving what it could", "_cached"))
            for label, suffix in labels:
                costs = [part.get(f"cost_{b}{suffix}") for b in ("min", "typical", "max")]
                shown = " / ".join("—" if c is None else f"{c:.4g}" for c in costs)
                rows.append((f"{name}cost {label} (min / typical / max)", shown))
        return cls(size.describe(), rows, over, size.calls)

    @classmethod
    def asking_for(cls, exc: ConfirmationNeeded) -> Figure:
        return cls.of(exc.size, exc.over)


def gate(kind: str, request: Request, form: Mapping[str, Any]) -> dict[str, Any]:
    """How the dashboard queues ``kind``'s job (``submit``'s keywords): always against the
    server's limits, the calls the form's button accepted (``confirm_calls``, shown with the
    figure) covering it; an audit with a blank ``limit`` always shows its figure first, since
    a blank limit means the whole design."""
    text = str(form.get("confirm_calls", "")).strip()
    confirmed = int(text) if text.isascii() and text.isdigit() else None
    ask = None
    if kind == "audit" and getattr(request, "limit", None) is None:
        ask = "the whole design (limit is blank)"
    return {"gated": kind in GATED, "confirmed_calls": confirmed, "ask": ask}


def dry_run_figure(
    engine: Engine, settings: Settings, kind: str, request: Request, *, ask: str | None = None
) -> Figure:
    """What the form's job would send and cost, nothing queued (``ask``: a reason to ask
    before it starts besides the server's limits); InvalidInputError for a kind that has
    no dry run."""
    if kind not in DRY_RUNS:
        raise InvalidInputError(
            f"a {kind} job has no dry run; dry runs estimate {', '.join(DRY_RUNS)} jobs"
        )
    size = JobSize.of(dry_run(engine, settings, kind, request.to_params()))
    return Figure.of(size, size.over(settings) + ([ask] if ask else []))
