"""`make test`'s closing report: phase times, the slowest tests, and the suite's counts."""

from __future__ import annotations

from pathlib import Path

from nodegate.suite import phases, report

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.e2e.test_a" name="test_slow" time="12.5"/>
<testcase classname="tests.e2e.test_a" name="test_failed" time="3.0"><failure/></testcase>
<testcase classname="tests.e2e.test_b" name="test_skipped" time="0.1"><skipped/></testcase>
<testcase classname="tests.e2e.test_b" name="test_erred" time="1.0"><error/></testcase>
<testcase classname="tests.e2e.test_b" name="test_fast" time="0.2"/>
</testsuite></testsuites>
"""


def _junit(tmp_path: Path) -> Path:
    path = tmp_path / "tier.xml"
    path.write_text(JUNIT, encoding="utf-8")
    return path


def test_a_tiers_counts_come_from_its_junit_xml_errors_counting_as_failures(tmp_path: Path) -> None:
    counts, _ = report.read_junit(_junit(tmp_path))

    assert counts == report.TierCount(passed=2, failed=2, skipped=1)


def test_the_slowest_tests_come_first_named_by_module_and_test(tmp_path: Path) -> None:
    _, times = report.read_junit(_junit(tmp_path))

    assert [test.name for test in report.slowest(times, 2)] == [
        "tests.e2e.test_a::test_slow",
        "tests.e2e.test_a::test_failed",
    ]


def test_the_report_ends_with_one_line_of_the_suites_counts() -> None:
    results = [
        report.PhaseResult("lint", 40.0, 0),
        report.PhaseResult("tests: unit", 95.0, 0, report.TierCount(10, 0, 1)),
        report.PhaseResult("tests: e2e", 610.0, 1, report.TierCount(5, 2, 0)),
    ]

    text = report.render(results, [report.TestTime("tests.e2e.test_a::test_slow", 12.5)], 745.0)

    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert lines[-1] == "suite: 15 passed, 2 failed, 1 skipped"
    assert "tests: e2e 10 min 10 s FAILED (exit 1), 5 passed, 2 failed" in lines
    assert "tests: unit 1 min 35 s ok, 10 passed, 1 skipped" in lines
    assert "12.5 s tests.e2e.test_a::test_slow" in lines
    assert "total 12 min 25 s" in lines


def test_every_tier_writes_its_junit_xml_where_the_report_reads_it() -> None:
    tiers = [phase for phase in phases.suite(Path(".venv/bin")) if phase.junit is not None]

    assert tiers
    for tier in tiers:
        assert tier.junit is not None
        assert f"--junitxml={tier.junit}" in tier.argv
        assert tier.junit.parent == phases.REPORTS
        assert tier.keep_going


def test_the_tiers_together_run_every_test_folder() -> None:
    tiers = [phase for phase in phases.suite(Path(".venv/bin")) if phase.junit is not None]
    folders = {arg for tier in tiers for arg in tier.argv if arg.startswith("tests/")}

    tests = Path(__file__).parents[2]
    expected = {
        f"tests/{child.name}" for child in tests.iterdir() if (child / "__init__.py").is_file()
    }
    assert folders == expected


def test_the_e2e_tier_keeps_its_helpers_in_support_and_its_tests_beside_the_conftest() -> None:
    # tests/e2e/README.md, "Layout": a helper module among the tests reads as a test file.
    e2e = Path(__file__).parents[2] / "e2e"
    top = {p.name for p in e2e.glob("*.py")} - {"__init__.py", "conftest.py"}
    assert sorted(n for n in top if not n.startswith("test_")) == []
    assert sorted(p.name for p in (e2e / "support").glob("test_*.py")) == []
