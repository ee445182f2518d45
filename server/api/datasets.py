"""``/api/datasets``: the datasets in the store."""

from __future__ import annotations

from dataclasses import asdict

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from judge.data import catalog
from server.db import get_session

bp = Blueprint("datasets", __name__)


@bp.get("/datasets")
def list_datasets() -> ResponseReturnValue:
    return jsonify([asdict(d) for d in catalog.list_datasets(get_session())])


@bp.get("/datasets/<name>")
def describe_dataset(name: str) -> ResponseReturnValue:
    return asdict(catalog.describe_dataset(get_session(), name))
