"""The market family of environments: the market itself (environment.py: elementwise,
pairwise and listwise decisions on real prices), the synthetic market with a planted signal
(synthetic.py) and the sequential portfolio (sequential.py), with what they share: the price
table and its faults (prices), signals and headlines, states and prompts, the answer grammar,
claim checks (hallucination), baselines, the leakage audit and the plots."""
