"""Every collected test carries exactly one cost marker (unit, integration or e2e), as tests/conftest.py gives them.

The whole suite's markers, after tests/conftest.py has added them: this session's own, where it collected every test
file (as `bash .ci/run` does); else the suite collected once in a subprocess (nothing runs) with a small plugin that
writes them. A new test in any folder must come out with one of the three.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import COST_MARKERS, SHIPPED_MODEL_TESTS, SLOW_TESTS

pytestmark = pytest.mark.integration  # collecting the whole suite imports every test module (torch, Gradio, ...)

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = '''
import json, os

def pytest_collection_finish(session):
    with open(os.environ["COST_MARKERS_OUT"], "w") as out:
        json.dump({item.nodeid: sorted({mark.name for mark in item.iter_markers()}) for item in session.items}, out)
'''


@pytest.fixture(scope="module")
def collected(request, tmp_path_factory) -> dict:
    """Node id -> the names of its markers, for every test of the suite."""
    items = request.session.items
    files = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")}
    if files <= {item.nodeid.split("::")[0] for item in items}:  # this session holds the whole suite
        return {item.nodeid: sorted({mark.name for mark in item.iter_markers()}) for item in items}
    folder = tmp_path_factory.mktemp("cost-markers")
    (folder / "cost_markers_dump.py").write_text(PLUGIN)
    out = folder / "markers.json"
    env = {**os.environ, "COST_MARKERS_OUT": str(out),
           "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "cost_markers_dump", "tests"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_test_has_exactly_one_cost_marker(collected):
    assert len(collected) > 1000
    wrong = {nodeid: [m for m in marks if m in COST_MARKERS] for nodeid, marks in collected.items()
             if sum(m in COST_MARKERS for m in marks) != 1}
    assert not wrong, f"{len(wrong)} tests without exactly one of {COST_MARKERS}: {dict(list(wrong.items())[:10])}"


def test_the_rules_sort_by_folder_fixture_and_timing(collected):
    def marker(prefix):
        found = {nodeid: [m for m in marks if m in COST_MARKERS] for nodeid, marks in collected.items()
                 if nodeid.startswith(prefix)}
        assert found, prefix
        return {m for marks in found.values() for m in marks}

    assert marker("tests/e2e/") == {"e2e"}  # the folder
    assert marker("tests/explorer/test_explorer_browser.py::") == {"e2e"}  # Playwright's page
    assert marker("tests/hub/") == {"integration"}  # the folder
    assert marker("tests/service/test_real_models.py::") == {"integration"}  # builds real-format models
    assert marker("tests/data/test_shipped_models.py::") == {"integration"}  # its own pytestmark
    assert marker("tests/core/test_maps.py::") == {"unit"}  # the default
    assert marker("tests/train/test_study.py::test_a_tiny_study_writes_results_and_resumes") == {"integration"}  # slow
    assert marker("tests/service/test_lesson.py::") == {"integration"}  # reads the shipped models


def test_every_test_named_in_the_tables_still_exists(collected):
    """SLOW_TESTS and SHIPPED_MODEL_TESTS name tests by id (or file): a renamed one must be renamed there too, or it
    silently becomes a unit test."""
    ids = {nodeid.split("[")[0] for nodeid in collected}
    files = {nodeid.split("::")[0] for nodeid in collected}
    missing = sorted(name for name in SLOW_TESTS | SHIPPED_MODEL_TESTS if name not in ids | files)
    assert not missing, missing
