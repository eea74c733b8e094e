"""The conformance runner's comparison (pure logic; the Tempest runs are the integration tier)."""

from tests.conformance.tempest_runner import Outcome, exceptions, read_list, regressions


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
