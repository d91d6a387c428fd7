"""Every Python example in the README and spec/ runs as it is written."""

import re
import subprocess
import sys

import pytest

from paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "spec").rglob("*.md"))]
BLOCKS = [(doc, n, code) for doc in DOCS
          for n, code in enumerate(re.findall(r"^```python\n(.*?)^```", doc.read_text(), re.S | re.M))]


def test_the_docs_have_examples():
    assert {doc.name for doc, _, _ in BLOCKS} >= {"README.md", "contract.md"}


@pytest.mark.parametrize("doc, n, code", BLOCKS, ids=[f"{d.relative_to(ROOT)}#{n}" for d, n, _ in BLOCKS])
def test_example_runs(doc, n, code, tmp_path):
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{doc.name} example {n}:\n{result.stderr[-3000:]}"
