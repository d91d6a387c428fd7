"""The house's rules: imports flow one way (import-linter, pyproject.toml), no module reaches
for another's private name, core/ stays small and pure and mypy finds no error in it, every
wing says what it holds, and a plain ``pip install .`` carries every wing and the py.typed
markers."""

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
import zipfile
from pathlib import Path

import pytest
from paths import ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
MYPY = Path(sys.executable).parent / "mypy"
RUFF = Path(sys.executable).parent / "ruff"
# Folder -> import name (pyproject.toml's package-dir); the longest folder a module is under wins.
PACKAGES = {"core": "groupcoord.core", "adapters/testing": "groupcoord.testing", "adapters": "groupcoord.adapters"}
WINGS = sorted(p.name for p in (ROOT / "adapters").iterdir() if (p / "__init__.py").exists())


def _modules(root: Path = ROOT):
    """(path, dotted module name) of every module of core/ and adapters/ under ``root``."""
    for top in ("core", "adapters"):
        for path in sorted((root / top).rglob("*.py")):
            folder = next(f for f in PACKAGES if path.is_relative_to(root / f))
            parts = [p for p in path.relative_to(root / folder).with_suffix("").parts if p != "__init__"]
            yield path, ".".join([PACKAGES[folder], *parts])


def private_reaches(root: Path = ROOT) -> list[str]:
    """Every place a module imports another groupcoord module's private name, or reads one
    through a module it imported (``invariants._v``)."""
    found = []
    for path, name in _modules(root):
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text())
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([module] if module else []))
                if not module.startswith("groupcoord"):
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and module != name:
                        found.append(f"{path.relative_to(root)}:{node.lineno}: from {module} import {alias.name}")
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("groupcoord"):
                        bound[alias.asname or alias.name.split(".")[0]] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def code_lines(path: Path) -> int:
    """Lines holding code: not blank, not only a comment, not a docstring."""
    source = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return len(lines)


def _lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = None
    if pythonpath is not None:
        import os

        env = dict(os.environ, PYTHONPATH=str(pythonpath))
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_imports_flow_one_way():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("plant", [
    ("adapters/checks/diagram.py", "from groupcoord.adapters.cli import main"),  # against the flow
    ("adapters/sim/demo.py", "from groupcoord.adapters.wire import server"),  # between siblings
    ("adapters/verify/compare.py", "from groupcoord.adapters.sim import report"),  # the product reaching the lab
    ("core/classic/states.py", "import groupcoord.adapters.runtime.driver"),  # the core reaching out
])
def test_the_import_rules_catch_a_planted_import(tmp_path, plant):
    """The same contracts on a copy of the house with one bad import planted."""
    copy = tmp_path / "groupcoord"
    for folder, name in PACKAGES.items():
        shutil.copytree(ROOT / folder, copy / name.split(".", 1)[1], ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    where, line = plant
    target = copy / where
    target.write_text(target.read_text() + f"\n{line}  # planted\n")
    result = _lint_imports(tmp_path, pythonpath=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "BROKEN" in result.stdout and "planted" not in result.stderr


def test_no_module_reaches_for_a_private_name():
    assert private_reaches() == []


def test_the_private_name_check_catches_a_planted_reach(tmp_path):
    for folder in ("core", "adapters"):
        (tmp_path / folder).mkdir()
    (tmp_path / "adapters" / "a.py").write_text(
        "from groupcoord.core.classic.model import _hidden\nfrom groupcoord.adapters.checks import invariants as inv\n"
        "inv._v('x', 'g', 'd')\nfrom . import b\nb._private()\n")
    assert len(private_reaches(tmp_path)) == 3


def test_core_is_small_pure_and_writes_nothing():
    """The size cap holds per package: core/'s shared modules, and each protocol's package."""
    packages = [ROOT / "core", *(p for p in sorted((ROOT / "core").iterdir()) if (p / "__init__.py").exists())]
    assert ROOT / "core" / "classic" in packages
    for package in packages:
        sizes = {path.name: code_lines(path) for path in sorted(package.glob("*.py"))}
        print(f"{package.relative_to(ROOT)} code lines:", sum(sizes.values()), sizes)
        assert sum(sizes.values()) <= 3000, package
        assert max(sizes.values()) <= 400, sizes
    for path in (ROOT / "core").rglob("*.py"):
        source = path.read_text()
        tree = ast.parse(source)
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "open" not in calls and "__main__" not in source, path.name


def test_code_lines_counts_code_only(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text('"""Doc\nstring."""\n\n# comment\nx = (1,\n     2)\n\n\ndef f():\n    """Doc."""\n    return x\n')
    assert code_lines(sample) == 4


def mypy_errors(output: str) -> dict[str, list[str]]:
    """mypy's error lines, by file."""
    errors: dict[str, list[str]] = {}
    for line in output.splitlines():
        path, sep, _ = line.partition(":")
        if sep and ": error:" in line:
            errors.setdefault(path, []).append(line)
    return errors


def test_mypy_finds_no_error_in_the_core(tmp_path):
    """mypy over all of core/ once, with pyproject.toml's [tool.mypy] (core/frozen.py shows it the
    attrs classes its ``frozen`` makes)."""
    result = subprocess.run([str(MYPY), "--cache-dir", str(tmp_path / "mypy_cache")], cwd=ROOT,
                            capture_output=True, text=True, timeout=600, check=False)
    # "Success: no issues found in N source files" or "Found E errors in F files (checked N source files)"
    checked = re.search(r"(?:found in|checked) (\d+) source files?\)?\s*$", result.stdout)
    assert result.returncode in (0, 1) and checked, result.stdout[-3000:] + result.stderr[-2000:]
    assert int(checked[1]) == len(list((ROOT / "core").rglob("*.py"))), checked[0]
    assert result.returncode == 0 and mypy_errors(result.stdout) == {}, result.stdout[-5000:]


def test_mypy_errors_are_read_by_file():
    output = ("core/a.py:3: error: Bad  [misc]\ncore/a.py:3: note: see\ncore/classic/b.py:1: error: x  [attr-defined]\n"
              "Found 2 errors in 2 files (checked 5 source files)\n")
    assert mypy_errors(output) == {"core/a.py": ["core/a.py:3: error: Bad  [misc]"],
                                   "core/classic/b.py": ["core/classic/b.py:1: error: x  [attr-defined]"]}


def test_adapters_is_wings_only_and_each_wing_says_what_it_holds():
    top = sorted(p.name for p in (ROOT / "adapters").glob("*.py"))
    assert top == ["__init__.py"]
    assert {"protocol", "client", "storage", "runtime", "checks", "traces", "replay", "sim", "wire", "observe",
            "scenarios", "conformance", "tla", "bench", "cli", "verify", "testing", "data"} == set(WINGS)
    for wing in WINGS:
        doc = ast.get_docstring(ast.parse((ROOT / "adapters" / wing / "__init__.py").read_text()))
        assert doc and "May import" in doc and len(doc) > 100, wing


def test_tests_mirror_the_wings():
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and list(p.glob("test_*.py"))}
    assert folders <= set(WINGS) | {"core"}, folders - set(WINGS)
    assert {"core", "wire", "replay", "storage", "tla"} <= folders


def test_a_plain_install_carries_every_wing(tmp_path):
    """``pip install .`` (no extras): the wheel holds every module, the ``groupcoord`` command and
    the py.typed markers of groupcoord.core and groupcoord.testing (PEP 561)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("groupcoord-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    for path, module in _modules():
        inside = module.replace(".", "/") + ("/__init__.py" if path.name == "__init__.py" else ".py")
        assert inside in names, inside
    assert "groupcoord = groupcoord.adapters.cli.main:main" in entry_points
    assert {"groupcoord/core/py.typed", "groupcoord/testing/py.typed"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)[-10:]


def test_every_path_the_docs_name_exists():
    import re

    # (spec/kafka-classic-semantics.md names Kafka's own files, not ours)
    docs = [ROOT / "README.md", ROOT / "tla" / "README.md",
            *sorted(p for p in (ROOT / "spec").glob("*.md") if p.name != "kafka-classic-semantics.md")]
    named = {m for doc in docs for m in re.findall(r"`((?:core|adapters|tests|spec|tla)/[\w./-]+)`", doc.read_text())}
    assert len(named) > 20
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


# The lab's wings: no operator command loads them (the ``bench`` commands import theirs inside
# the command; import-linter keeps the product's wings from importing them at all).
LAB_WINGS = ("groupcoord.adapters.bench", "groupcoord.adapters.sim", "groupcoord.adapters.conformance")
_LOADED_BY = r"""
import contextlib, io, json, sys
from groupcoord.adapters.cli.main import main
loaded = {}
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
    loaded[" ".join(argv)] = sorted(m for m in sys.modules if m.startswith(tuple(json.loads(sys.argv[2]))))
print(json.dumps(loaded))
"""


def test_operator_commands_load_no_lab_wing():
    """Parsing any operator command, and running a scenario file, loads no lab wing."""
    import json

    scenario = sorted((ROOT / "tests" / "scenarios").glob("*.json"))[0]
    commands = [[c, "--help"] for c in ("serve", "groups", "offsets", "verify", "probe", "record", "replay",
                                       "timeline", "inject-faults", "scenario")]
    commands.append(["scenario", "--quiet", str(scenario)])
    proc = subprocess.run([sys.executable, "-c", _LOADED_BY, json.dumps(commands), json.dumps(LAB_WINGS)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = json.loads(proc.stdout.splitlines()[-1])
    assert set(loaded) == {" ".join(c) for c in commands}
    assert {command: lab for command, lab in loaded.items() if lab} == {}


def test_ruff_finds_nothing_in_the_tree():
    """pyproject.toml's [tool.ruff] rules (pyflakes, import order, pycodestyle's E4/E7/E9, and no
    ``# noqa`` that suppresses nothing) over every Python file of the repository."""
    result = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", "."], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_ruff_catches_a_planted_undefined_name(tmp_path):
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "m.py").write_text("def f():\n    return undefined_name  # noqa: E501\n")
    result = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", "."], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 1 and "F821" in result.stdout and "RUF100" in result.stdout, result.stdout
