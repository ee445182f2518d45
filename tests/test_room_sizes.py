"""Small rooms (issue 43): no product module over 600 lines and no function over 100 lines.

Product code is judge/, annotation/, server/ and datasets/ (Alembic's migrations exempt). A
module's size is its number of lines as ``str.splitlines`` counts them; a function's is
``end_lineno - lineno + 1`` of its ``def`` node (decorators not counted), nested functions
counted inside their parent and on their own.

The modules not split yet are listed with their size today as a ceiling: they may shrink,
never grow, and a listed module that is split (or shrinks under the limit) must leave the list,
so the list only shrinks."""

from __future__ import annotations

import ast
from pathlib import Path

from judge.paths import checkout_root

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
PRODUCT = ("judge", "annotation", "server", "datasets")

# Modules over the limit, each with its line count when it was listed (its ceiling): none
# since the last five were split; a module that grows past the limit is split, not listed.
NOT_SPLIT_YET: dict[str, int] = {}

# Functions over the limit (module path, qualified name) -> lines; none today.
LONG_FUNCTIONS_YET: dict[tuple[str, str], int] = {}


def product_modules(root: Path) -> list[Path]:
    """Every Python file of the product packages, outside Alembic's migrations."""
    found: list[Path] = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" not in path.relative_to(root).parts:
                found.append(path)
    return found


def function_sizes(source: str) -> dict[str, int]:
    """Qualified name (``Class.method``, ``outer.inner``) -> lines of each function."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                assert child.end_lineno is not None
                sizes[name] = child.end_lineno - child.lineno + 1
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sizes


def oversized_modules(root: Path, ceilings: dict[str, int]) -> dict[str, int]:
    """Modules over their ceiling (the limit, or their listed size) -> their lines."""
    too_big = {}
    for path in product_modules(root):
        name = path.relative_to(root).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > ceilings.get(name, MAX_MODULE_LINES):
            too_big[name] = lines
    return too_big


def overlong_functions(
    root: Path, ceilings: dict[tuple[str, str], int]
) -> dict[tuple[str, str], int]:
    """(module, function) over its ceiling (the limit, or its listed size) -> its lines."""
    too_long = {}
    for path in product_modules(root):
        name = path.relative_to(root).as_posix()
        for function, lines in function_sizes(path.read_text(encoding="utf-8")).items():
            if lines > ceilings.get((name, function), MAX_FUNCTION_LINES):
                too_long[(name, function)] = lines
    return too_long


def _root() -> Path:
    root = checkout_root()
    assert root is not None
    return root


def test_no_module_grows_past_its_ceiling() -> None:
    too_big = oversized_modules(_root(), NOT_SPLIT_YET)
    assert too_big == {}, f"split these modules (limit {MAX_MODULE_LINES} lines)"


def test_no_function_grows_past_its_ceiling() -> None:
    too_long = overlong_functions(_root(), LONG_FUNCTIONS_YET)
    assert too_long == {}, f"split these functions into named steps (limit {MAX_FUNCTION_LINES})"


def test_the_lists_of_rooms_not_split_yet_only_shrink() -> None:
    # A listed module that no longer exists, or is now under the limit, leaves the list: it
    # cannot keep a ceiling that would let it grow back.
    root = _root()
    stale = [
        name
        for name in NOT_SPLIT_YET
        if not (root / name).exists()
        or len((root / name).read_text(encoding="utf-8").splitlines()) <= MAX_MODULE_LINES
    ]
    assert stale == []
    stale_functions = []
    for name, function in LONG_FUNCTIONS_YET:
        path = root / name
        sizes = function_sizes(path.read_text(encoding="utf-8")) if path.exists() else {}
        if sizes.get(function, 0) <= MAX_FUNCTION_LINES:
            stale_functions.append((name, function))
    assert stale_functions == []


def test_the_measures_count_what_they_say() -> None:
    # Line numbers written beside each source line; f spans lines 1-4 (4 lines), inner 2-3
    # (2), and C.g's def is on line 7 (its decorator on line 6 is not counted), to line 8 (2).
    source = (
        "def f():\n"  # 1
        "    def inner():\n"  # 2
        "        return 1\n"  # 3
        "    return inner\n"  # 4
        "class C:\n"  # 5
        "    @staticmethod\n"  # 6
        "    def g():\n"  # 7
        "        pass\n"  # 8
    )
    assert function_sizes(source) == {"f": 4, "f.inner": 2, "C.g": 2}


def _plant(root: Path, module_lines: int, function_lines: int) -> None:
    """A product tree with one module of ``module_lines`` lines holding a function of
    ``function_lines`` lines (its def line and ``function_lines - 1`` body lines), the rest
    padding; and a migration over both limits, which is exempt."""
    body = "def planted():\n" + "    x = 1\n" * (function_lines - 1)
    padding = "y = 1\n" * (module_lines - function_lines)
    (root / "judge" / "sub").mkdir(parents=True)
    (root / "judge" / "sub" / "room.py").write_text(body + padding, encoding="utf-8")
    migrations = root / "judge" / "store" / "migrations"
    migrations.mkdir(parents=True)
    long = "def upgrade():\n" + "    x = 1\n" * 700
    (migrations / "0001.py").write_text(long, encoding="utf-8")


def test_a_planted_big_module_and_long_function_are_caught(tmp_path: Path) -> None:
    _plant(tmp_path, MAX_MODULE_LINES + 1, MAX_FUNCTION_LINES + 1)
    assert oversized_modules(tmp_path, {}) == {"judge/sub/room.py": 601}
    assert overlong_functions(tmp_path, {}) == {("judge/sub/room.py", "planted"): 101}
    # Listed with its size as the ceiling, it passes; one line more than the ceiling fails.
    assert oversized_modules(tmp_path, {"judge/sub/room.py": 601}) == {}
    assert oversized_modules(tmp_path, {"judge/sub/room.py": 600}) == {"judge/sub/room.py": 601}


def test_a_module_and_function_at_the_limits_pass(tmp_path: Path) -> None:
    _plant(tmp_path, MAX_MODULE_LINES, MAX_FUNCTION_LINES)
    assert oversized_modules(tmp_path, {}) == {}
    assert overlong_functions(tmp_path, {}) == {}
