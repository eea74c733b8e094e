"""The conformance runner's comparison (pure logic; the Tempest runs are the integration tier)."""

from tests.conformance.tempest_runner import Outcome, exceptions, parse_subunit, read_list, regressions


def test_a_test_passing_directly_and_failing_through_isthmus_is_a_regression_unless_excepted():
    direct = Outcome(passed={"a.T.test_one", "a.T.test_two", "a.U.test_three"})
    isthmus = Outcome(passed={"a.T.test_one"}, failed={"a.T.test_two"}, skipped={"a.U.test_three"})
    assert regressions(direct, isthmus, {}) == ["a.T.test_two", "a.U.test_three"]
    assert regressions(direct, isthmus, {r"^a\.U\.": "design limit"}) == ["a.T.test_two"]
    assert regressions(isthmus, direct, {}) == []  # passing more through Isthmus is fine


def test_lists_and_exceptions_parse():
    assert all(line.startswith("^tempest.api.") or line.startswith("^tempest\\.api\\.")
               for line in read_list("compute_ci"))
    assert all(reason for reason in exceptions().values())


def test_tests_of_a_class_skipped_in_set_up_class_count_as_skipped():
    import io

    import subunit

    buf = io.BytesIO()
    out = subunit.StreamResultToBytes(buf)
    skipped_class, broken_class = "tempest.api.volume.test_x.SummaryTest", "tempest.api.volume.test_x.BrokenTest"
    out.status(test_id=f"{skipped_class}.test_summary[id-1]", test_status="exists")
    out.status(test_id=f"setUpClass ({skipped_class})", test_status="skip")
    out.status(test_id=f"{broken_class}.test_other[id-2]", test_status="exists")
    out.status(test_id="tempest.api.volume.test_x.OkTest.test_ok[id-3]", test_status="success")
    outcome = parse_subunit(buf.getvalue())
    assert outcome.skipped == {f"{skipped_class}.test_summary"}
    assert outcome.failed == {f"{broken_class}.test_other"}  # listed, never run, no skip: not a pass
    assert outcome.passed == {"tempest.api.volume.test_x.OkTest.test_ok"}
