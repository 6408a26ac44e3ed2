"""Measures of an answer's reason that a copied template cannot pass, for every environment.

A reason is what a completion says after its decision (its first word: "A", "yes",
"A=0.6,"), lowercased, with every number masked ("#"), punctuation dropped and runs of white
space made one, so that "A: +0.25 +2.01" and "A: -1.10 +0.40" are one template (the same
words, other figures), as are "because of the rain." and "because of the rain". For the
template measures a word or phrase repeated in a row counts once, so that "because no no no"
and "because no no no no no no" are one template, as are "because no because no" and
"because no": SmolLM2's degenerate repetitions end where max_new_tokens cuts them, and their
lengths varied enough to halve a round's template share (weather_claims seed 2's round 1 at
124012a: 6.2% of its sampled answers by the whole text, 13.4% with repeats counted once).
Of one policy's answers in one decoding mode:

template_rate     per answer, 1.0 where its reason is the most common non-empty one among
                  them (ties: the first in sorted order), else 0.0; its mean is the template
                  share. A policy that recites the prompt in one shape ("A: " and A's
                  returns) scores about 1; one that argues from what each prompt shows, low.
no_reason_rate    per answer, 1.0 where nothing follows the decision.
distinct_reasons  distinct non-empty reasons per 100 answers.

Where the environment reads what a reason argues (its score's reason_consistency and
reason_supported), per valid answer:
consistent_rate       1.0 where the reason argues for the answer given;
inconsistent_rate     1.0 where it argues for another answer;
no_argument_rate      1.0 where it argues for none (a recital, a restated question, a
                      reason that argues both ways);
supported_reason_rate 1.0 where it argues for the answer given and every statement it rests
                      on holds in the prompt: the reason the grounding reward pays for.
And where the environment changes prompts (its counterfactual), per answer pair:
follows_rate          1.0 where the decision on the changed prompt moved as a reader's would
                      (evaluate's ``follows``; NaN where either answer is invalid).

What they cannot tell: a varied reason may still be wrong, and a short right one ("because
it rained today") repeated on every rainy day is a template by this measure; a consistent,
supported reason may not be why the model decided, which is what following the changed
evidence tests. docs/evaluation.md says what each measure can and cannot show.
"""

from __future__ import annotations

import re

import pandas as pd

TEMPLATE_SHARE = 0.2  # the template share issue 70's done-when allows
# where grounding.reason_bonus stops paying a reason (rationales.paid): half the allowed share,
# because imitation concentrates what it pays: "because of the rain" was 6% of weather_claims
# seed 0's round-2 samples at 8c0ec98, paid 0.7 of the bonus, and 25% of its answers after
PAID_SHARE = 0.1
_NUMBER = r"[+-]?\d+(?:[.,]\d+)*"
# a phrase of up to 8 words, then itself again, once or more (the shortest phrase that
# repeats; the bound keeps a long reason's scan linear)
_REPEATED = re.compile(r"\b(\w+(?: \w+){0,7}?)(?: \1\b)+")


def reasons(completions: pd.Series) -> pd.Series:
    """Each completion's reason: after its first word, lowercased, numbers masked, punctuation
    dropped."""
    text = completions.fillna("").astype(str).str.strip().str.lower()
    after = text.str.split(n=1).str[1].astype(object).fillna("").astype(str)
    masked = after.str.replace(_NUMBER, "#", regex=True)
    return masked.str.replace(r"[^\w#]+", " ", regex=True).str.strip()


def templates(completions: pd.Series) -> pd.Series:
    """Each completion's reason with every run of a repeated word or phrase written once: what
    the template measures compare ("because no no no" -> "because no"), until none is left
    ("because no because no no" -> "because no no" -> "because no")."""
    said = reasons(completions)
    while True:
        once = said.str.replace(_REPEATED, r"\1", regex=True)
        if once.equals(said):
            return said
        said = once


def indicators(answers: pd.DataFrame) -> pd.DataFrame:
    """The measures of the module per answer, indexed like ``answers`` (the scored answers
    of one policy in one decoding mode: completion, and where the environment gives them
    reason_consistency, reason_supported and follows); a measure the environment does not
    give is left out."""
    said = templates(answers["completion"])
    given = said[said != ""]
    template = given.value_counts().sort_index().idxmax() if len(given) else None
    out = pd.DataFrame(
        {
            "template_rate": ((said == template) & (said != "")).astype(float),
            "no_reason_rate": (said == "").astype(float),
        },
        index=answers.index,
    )
    if "reason_consistency" in answers:
        c = answers["reason_consistency"].astype(float)
        measured = c.notna()
        for name, value in (("consistent_rate", 1), ("inconsistent_rate", -1), ("no_argument_rate", 0)):
            out[name] = (c == value).astype(float).where(measured)
        held = answers["reason_supported"].astype(float) == 1
        out["supported_reason_rate"] = ((c == 1) & held).astype(float).where(measured)
    if "follows" in answers:
        out["follows_rate"] = answers["follows"].astype(float)
    return out


def summary(completions: pd.Series) -> dict:
    """distinct_reasons (per 100 answers) and the template itself, for metrics.json."""
    said = templates(completions)
    given = said[said != ""]
    return {
        "distinct_reasons": 100.0 * given.nunique() / max(len(said), 1),
        "template": given.value_counts().sort_index().idxmax() if len(given) else None,
    }


def paid(answers: pd.DataFrame) -> pd.Series:
    """What grounding.reason_bonus pays or charges each answer for, from -1 to 1 (score's
    ``answers``: a round's scored answers): where its reason argues for the answer given from
    statements its prompt supports, 1 - share / PAID_SHARE, share being the share of the
    answers that give the same reason (:func:`reasons`: figures masked, punctuation dropped),
    so that a reason one answer in ten gives, or more, earns nothing (at 1 - share, "because of
    the rain." in 16% of round 2's samples earned 0.84 and rose to 23% of the evaluated
    answers, weather_claims seed 0 at c71521d; at 1 - share / 0.2, in 6% it earned 0.7 and
    rose to 25%, seed 0 at 8c0ec98); -1 where it argues
    for another answer than the one it gives (Trade-R1's consistency gate, as a charge: "no
    because of rain", the reason of "yes" after "no", was 37% of the "no" answers of
    weather_claims seed 0's round 1 at fb9cd0c, where it cost nothing); else 0."""
    # the whole reason, repeats and all (not templates'): the design the evidence runs trained
    # (docs/evidence.md); a repeated paid phrase splitting its share by length is untested
    said = reasons(answers["completion"])
    share = said.map(said.value_counts(normalize=True))
    good = (answers["reason_consistency"] == 1) & (answers["reason_supported"] == 1)
    against = answers["reason_consistency"] == -1
    return ((1 - share / PAID_SHARE).clip(lower=0) * good - against).astype(float)
