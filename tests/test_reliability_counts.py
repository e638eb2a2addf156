"""How many bad inputs and fault scenarios the suite tries (issue 15's acceptance:
at least 200 distinct bad inputs and 60 fault-injection scenarios).

Counted from the parametrisations themselves, so the figure does not depend
on which files a run selects; tests/conftest.py also prints the numbers
collected in the run's terminal summary.
"""
import test_bad_inputs
import test_faults


def bad_input_count():
    ids = [c.id for c in test_bad_inputs.CASES]
    assert len(ids) == len(set(ids)), "bad-input ids must be distinct"
    return len(ids)


def fault_scenario_count():
    return test_faults.scenario_count()


def test_at_least_200_bad_inputs_and_60_fault_scenarios(capsys):
    n_bad, n_fault = bad_input_count(), fault_scenario_count()
    with capsys.disabled():
        print(f"\nbad-input cases: {n_bad}; fault-injection scenarios: {n_fault}")
    assert n_bad >= 200
    assert n_fault >= 60
