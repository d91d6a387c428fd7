"""Every Python example in the README and spec/ runs as it is written. An example that talks
to the server (``127.0.0.1:9092``, the README's ``groupcoord serve --topic orders=6``) runs
against a real ``groupcoord serve`` started for it, on a free port put in 9092's place."""

import re
import subprocess
import sys

import pytest
from paths import ROOT
from server_harness import ServerProcess

DOCS = [ROOT / "README.md", *sorted((ROOT / "spec").rglob("*.md"))]
# A block that opens with "# test_NAME.py" is a pytest file, run by pytest with the plugin
# (tests/testing/test_docs_pytest_examples.py).
BLOCKS = [(doc, n, code) for doc in DOCS
          for n, code in enumerate(re.findall(r"^```python\n(.*?)^```", doc.read_text(), re.S | re.M))
          if not re.match(r"# test_\w+\.py\n", code)]
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


@pytest.fixture(scope="module")
def server():
    # The README's main job, on a free port, with memory storage and its default settings.
    process = ServerProcess("--storage", "memory", topics=("orders=6",),
                            settings={"group.initial.rebalance.delay.ms": 3000})
    yield process
    process.stop()


def test_the_docs_have_examples():
    assert {doc.name for doc, _, _ in BLOCKS} >= {"README.md", "contract.md"}
    assert sum(DEFAULT_BOOTSTRAP in code for _, _, code in BLOCKS) >= 3  # one per client library


@pytest.mark.parametrize("doc, n, code", BLOCKS, ids=[f"{d.relative_to(ROOT)}#{n}" for d, n, _ in BLOCKS])
def test_example_runs(doc, n, code, tmp_path, request):
    if DEFAULT_BOOTSTRAP in code:
        code = code.replace(DEFAULT_BOOTSTRAP, request.getfixturevalue("server").bootstrap)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, f"{doc.name} example {n}:\n{result.stderr[-3000:]}"
