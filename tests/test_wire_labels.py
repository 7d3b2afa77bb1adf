"""Task labels for Flower: enough to find and tell tasks apart, never a whole prompt."""

from __future__ import annotations

from covey import wire


def test_an_agent_label_names_job_agent_role_depth_and_the_first_words():
    task = "Summarise the quarterly report and list every risk you find in it, with owners"
    shown = wire.agent("job-1", "root-sub-ab12cd34", "analyst", 1, task)
    assert shown["kwargsrepr"] == (
        "job=job-1 agent=root-sub-ab12cd34 role=analyst depth=1 "
        "task='Summarise the quarterly report and list every risk …'"
    )
    assert "owners" not in shown["kwargsrepr"] and shown["argsrepr"] == "()"


def test_a_resume_label_counts_the_results_it_carries():
    assert wire.resume("job-1", "root", 2, 5) == {
        "argsrepr": "[5 child results]",
        "kwargsrepr": "job=job-1 agent=root round=2",
    }
