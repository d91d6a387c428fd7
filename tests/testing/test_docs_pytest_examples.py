"""The docs' pytest examples (a Python block opening with ``# test_NAME.py``, such as the
README's "Use it in your tests") run as they are written: pytest with the plugin, in a fresh
directory, every test in them passing."""

from __future__ import annotations

import re

import pytest
from paths import ROOT
from plugin_runner import plugin_args

pytest_plugins = ["pytester"]

DOCS = [ROOT / "README.md", *sorted((ROOT / "spec").rglob("*.md"))]
EXAMPLES = [(doc, m.group(1), m.group(0)) for doc in DOCS
            for m in re.finditer(r"(?<=^```python\n)# (test_\w+)\.py\n.*?(?=^```)", doc.read_text(), re.S | re.M)]


def test_the_readme_has_its_example():
    assert [name for doc, name, _ in EXAMPLES if doc.name == "README.md"] == ["test_billing", "test_orders"]
    section = (ROOT / "README.md").read_text().split("## Use it in your tests", 1)[1].split("\n## ", 1)[0]
    assert "# test_billing.py" in section and "groupcoord_server" in section


@pytest.mark.parametrize("doc, name, code", EXAMPLES, ids=[f"{d.name}:{n}" for d, n, _ in EXAMPLES])
def test_example_passes(doc, name, code, pytester: pytest.Pytester):
    pytester.makepyfile(**{name: code})
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", timeout=120)
    outcomes = result.parseoutcomes()
    assert result.ret == 0 and outcomes.get("passed", 0) >= 1, f"{doc.name} {name}:\n{result.stdout.str()[-3000:]}"
