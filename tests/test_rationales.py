"""The reason measures: a copied template, varied reasons, no reason, hand-written answers."""

from __future__ import annotations

import pandas as pd
import pytest

from hitchhiker import rationales


def test_a_recited_template_is_one_reason_whatever_its_figures():
    template = pd.Series([f"A: +{i}.25 -{i}.01 +0.9{i}" for i in range(9)] + ["B because A fell 2% today"])
    rates = rationales.indicators(template)
    assert rates["template_rate"].mean() == pytest.approx(0.9)
    assert rationales.summary(template) == {"distinct_reasons": pytest.approx(20.0), "template": "# # #"}


def test_varied_reasons_are_no_template_and_a_bare_answer_has_no_reason():
    varied = pd.Series(["yes because it rained 3 days", "no because today was dry", "no", "yes: wet and windy"])
    rates = rationales.indicators(varied)
    assert rates["no_reason_rate"].tolist() == [0, 0, 1, 0]
    assert rates["template_rate"].sum() == 1  # a tie of ones: one reason, the first in sorted order
    assert rationales.summary(varied)["distinct_reasons"] == pytest.approx(75.0)


def test_a_policy_that_answers_without_reasons_has_no_template():
    bare = pd.Series(["A", "A", " A ", None])
    assert rationales.indicators(bare)["template_rate"].sum() == 0
    assert rationales.summary(bare) == {"distinct_reasons": 0.0, "template": None}
