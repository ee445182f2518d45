"""docs/architecture.md stays true in both directions: every package and module its tree names
exists, and every module of judge/, annotation/ and server/ is named in the tree."""

from __future__ import annotations

import re
from pathlib import Path

from judge.paths import checkout_root

PACKAGES = ("judge", "annotation", "server")


def tree_paths(tree: str) -> list[str]:
    """Paths named in the tree block: top-level folders, their modules and subfolders, and
    the modules a subfolder's description lists (``engine.py (...)``)."""
    named: list[str] = []
    top = ""
    for line in tree.splitlines():
        match = re.match(r"^(\s*)(\S+)\s*(.*)$", line)
        if not match:
            continue
        indent, first, rest = match.groups()
        if not indent:
            folders = [c for c in re.split(r"\s{2,}", line) if re.fullmatch(r"[\w.]+/", c)]
            top = folders[0]
            named += folders
            continue
        named.append(top + first)
        if first.endswith("/"):
            named += [top + first + m for m in re.findall(r"\b([a-z_]+\.py)\b", rest)]
    return named


def package_modules(root: Path) -> set[str]:
    """Every module file of the three packages, as a checkout-relative path, except package
    markers (``__init__.py``, ``__main__.py``) and Alembic's migrations folder."""
    found: set[str] = set()
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            relative = path.relative_to(root).as_posix()
            if path.name in ("__init__.py", "__main__.py") or "/migrations/" in relative:
                continue
            found.add(relative)
    return found


def _tree() -> tuple[Path, list[str]]:
    root = checkout_root()
    assert root is not None
    text = (root / "docs" / "architecture.md").read_text()
    return root, tree_paths(text.split("```")[1])


def test_every_path_named_in_the_tree_exists() -> None:
    root, named = _tree()
    assert len(named) > 100, "the tree parser found too few entries: did the layout change?"
    missing = [n for n in named if not (root / n).exists()]
    assert missing == []


def test_every_module_is_named_in_the_tree() -> None:
    # The other direction: a module added without a line in the architecture doc fails here.
    root, named = _tree()
    assert sorted(package_modules(root) - set(named)) == []


def test_the_tree_parser_reads_both_line_shapes() -> None:
    # A hand-written two-package tree: a module line, a folder line listing its modules, and a
    # second top-level folder; the expected paths are read off the text by eye.
    tree = (
        "judge/   core\n"
        "  paths.py   where files are\n"
        "  store/     engine.py (the engine), tables.py\n"
        "server/  interfaces\n"
        "  db.py      sessions\n"
    )
    assert tree_paths(tree) == [
        "judge/",
        "judge/paths.py",
        "judge/store/",
        "judge/store/engine.py",
        "judge/store/tables.py",
        "server/",
        "server/db.py",
    ]


def test_every_backticked_module_path_exists() -> None:
    root = checkout_root()
    assert root is not None
    text = (root / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"`((?:judge|annotation|server)/[\w/]+\.py)`", text))
    assert paths, "no module paths found"
    assert [p for p in sorted(paths) if not (root / p).exists()] == []
