"""Measures of an answer's reason that a copied template cannot pass, for every environment.

A reason is what a completion says after its decision (its first word: "A", "yes",
"A=0.6,"), lowercased, with every number masked ("#") and runs of white space made one, so
that "A: +0.25 +2.01" and "A: -1.10 +0.40" are one template: the same words, other figures.
Of one policy's answers in one decoding mode:

template_rate     per answer, 1.0 where its reason is the most common non-empty one among
                  them (ties: the first in sorted order), else 0.0; its mean is the template
                  share. A policy that recites the prompt in one shape ("A: " and A's
                  returns) scores about 1; one that argues from what each prompt shows, low.
no_reason_rate    per answer, 1.0 where nothing follows the decision.
distinct_reasons  distinct non-empty reasons per 100 answers.

What they cannot tell: a varied reason may still be wrong, and a short right one ("because
it rained today") repeated on every rainy day is a template by this measure. The claims
(environments' score) and the consistency of the reason with the answer say the rest.
"""

from __future__ import annotations

import pandas as pd

_NUMBER = r"[+-]?\d+(?:[.,]\d+)*"


def reasons(completions: pd.Series) -> pd.Series:
    """Each completion's reason: after its first word, lowercased, numbers masked."""
    text = completions.fillna("").astype(str).str.strip().str.lower()
    after = text.str.split(n=1).str[1].fillna("")
    return after.str.replace(_NUMBER, "#", regex=True).str.replace(r"\s+", " ", regex=True).str.strip()


def indicators(completions: pd.Series) -> pd.DataFrame:
    """template_rate and no_reason_rate per answer (see the module), indexed like ``completions``:
    the answers of one policy in one decoding mode."""
    said = reasons(completions)
    given = said[said != ""]
    template = given.value_counts().sort_index().idxmax() if len(given) else None
    return pd.DataFrame(
        {
            "template_rate": ((said == template) & (said != "")).astype(float),
            "no_reason_rate": (said == "").astype(float),
        },
        index=completions.index,
    )


def summary(completions: pd.Series) -> dict:
    """distinct_reasons (per 100 answers) and the template itself, for metrics.json."""
    said = reasons(completions)
    given = said[said != ""]
    return {
        "distinct_reasons": 100.0 * given.nunique() / max(len(said), 1),
        "template": given.value_counts().sort_index().idxmax() if len(given) else None,
    }
