"""train.objective: what each objective takes from the buffer (checked by hand), the
full-information loss and its shared-prompt step, and each objective through the whole DAG."""

import importlib.machinery
import importlib.util
import json
import math
import re
import shutil

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from conftest import ROOT, job_counts, run, tiny_config, write_config
from hitchhiker import buffer
from hitchhiker.environments import get
from hitchhiker.training.full_information import action_logps, loss_and_stats
from hitchhiker.training.objectives import rows as objective_rows


def _samples(rewards: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for g, (name, rs) in enumerate(rewards.items()):
        for k, r in enumerate(rs):
            rows.append(
                dict(
                    group=name, state_id=name, sample_idx=k, prompt_ids=[7, g], completion_ids=[g, k, 99],
                    model_mask=[1, 0, 1] if k == 0 else [1, 1, 1], reward=r,
                )
            )  # fmt: skip
    return pd.DataFrame(rows).sample(frac=1, random_state=0)  # the buffer's order must not matter


REWARDS = {
    "1/a": [0.3, -0.1, 0.3, 0.0],  # best: 0 (first of the two 0.3), worst: 1
    "1/b": [0.05, 0.05, 0.05, 0.05],  # all equal: no pair, no best answer
    "1/c": [0.0, 0.01, 0.005, 0.0],  # best 1, worst 0 (first of the two 0.0); a gap of 0.01
}


def test_dpo_takes_each_groups_best_and_worst_where_they_differ_by_more_than_the_margin():
    pairs = objective_rows.dpo_pairs(_samples(REWARDS), margin=0.0)
    assert list(pairs.group) == ["1/a", "1/c"]
    assert list(pairs.chosen_idx) == [0, 1] and list(pairs.rejected_idx) == [1, 0]
    assert pairs.prompt_ids.tolist() == [[7, 0], [7, 2]]
    assert pairs.chosen_ids.tolist() == [[0, 0, 99], [2, 1, 99]]
    assert pairs.rejected_ids.tolist() == [[0, 1, 99], [2, 0, 99]]
    assert list(objective_rows.dpo_pairs(_samples(REWARDS), margin=0.02).group) == ["1/a"]
    assert objective_rows.dpo_pairs(_samples({"1/b": REWARDS["1/b"]}), margin=0.0).empty


def test_best_answers_are_each_groups_best_above_its_mean_with_the_loss_on_the_models_tokens():
    rows = objective_rows.best_answers(_samples(REWARDS))
    assert list(rows.group) == ["1/a", "1/c"] and list(rows.sample_idx) == [0, 1]
    assert rows.input_ids.tolist() == [[7, 0, 0, 0, 99], [7, 2, 2, 1, 99]]
    # the prompt is not trained, nor the environment's token (model_mask 0) in sample 0
    assert rows.completion_mask.tolist() == [[0, 0, 1, 0, 1], [0, 0, 1, 1, 1]]


def _llama(seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    return LlamaForCausalLM(cfg).float().eval()


BATCH = [  # prompts of different lengths; two or three actions, some of two tokens
    {"prompt_ids": [1, 5, 9, 3, 4], "action_ids": [[10], [11]], "rewards": [0.02, -0.01]},
    {"prompt_ids": [2, 6], "action_ids": [[12, 13], [14], [15, 16]], "rewards": [0.0, 0.0, 0.01]},
    {"prompt_ids": [8, 8, 7, 1, 2, 3, 4], "action_ids": [[10], [11]], "rewards": [-0.03, 0.01]},
]


def _alone(model, prompt, action):
    """log pi(action | prompt) from one unpadded forward pass of that row alone."""
    ids = torch.tensor([prompt + action])
    logp = torch.log_softmax(model(input_ids=ids).logits.float(), -1)[0]
    return sum(logp[len(prompt) - 1 + j, a] for j, a in enumerate(action))


def _opened(batch: list[dict], opening: list[int]) -> list[dict]:
    """``batch`` with every prompt (and each trained sample's prompt) opening with ``opening``."""
    return [
        {
            **x,
            "prompt_ids": opening + x["prompt_ids"],
            **(
                {
                    "best_ids": [opening + b for b in x["best_ids"]],
                    "best_mask": [[0] * len(opening) + m for m in x["best_mask"]],
                }
                if "best_ids" in x
                else {}
            ),
        }
        for x in batch
    ]


# the second: every prompt opens with the same 3 tokens (as a chat template's system turn), which
# the shared step computes once for the batch
@pytest.mark.parametrize("opening", [[], [7, 3, 1]])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_action_logprobs_and_gradients_are_the_same_with_the_prompt_shared(attn, opening):
    from hitchhiker.training.full_information import _opening

    model = _llama()
    model.config._attn_implementation = attn
    batch = _opened(BATCH, opening)
    assert _opening(model, batch)[0] == len(opening)
    expected = torch.stack([_alone(model, x["prompt_ids"], a) for x in batch for a in x["action_ids"]])
    grads = {}
    for share in (True, False):
        model.zero_grad()
        logps, owner = action_logps(model, batch, share_prompt=share, eager=attn == "eager")
        assert owner == [0, 0, 1, 1, 1, 2, 2]
        torch.testing.assert_close(logps, expected, atol=1e-5, rtol=1e-5)
        loss_and_stats(logps, owner, [x["rewards"] for x in batch])[0].backward()
        grads[share] = torch.cat([p.grad.flatten() for p in model.parameters()])
    torch.testing.assert_close(grads[True], grads[False], atol=1e-5, rtol=1e-4)


def test_under_gradient_checkpointing_each_state_computes_the_opening_itself():
    """transformers' layers keep no cache under gradient checkpointing (train.gradient_checkpointing):
    the shared step computes the common opening in each state's packed row, as without one."""
    from hitchhiker.training.full_information import _opening

    model = _llama()
    batch = _opened(BATCH, [7, 3, 1])
    expected = torch.stack([_alone(model, x["prompt_ids"], a) for x in batch for a in x["action_ids"]])
    model.gradient_checkpointing_enable()
    model.train()
    assert _opening(model, batch) == (0, None)
    logps, _ = action_logps(model, batch, share_prompt=True, eager=False)
    torch.testing.assert_close(logps, expected, atol=1e-5, rtol=1e-5)


def test_the_loss_is_the_gap_weighted_cross_entropy_to_the_best_action():
    logps = torch.log(torch.tensor([0.2, 0.3, 0.1, 0.1, 0.3]))
    owner = [0, 0, 1, 1, 1]
    rewards = [[0.03, -0.01], [0.0, 0.02, 0.01]]
    loss, kl, stats = loss_and_stats(logps, owner, rewards)
    assert kl.item() == 0.0  # no reference: no anchor
    w = torch.tensor([0.03 - 0.01, 0.02 - 0.01])  # best minus the actions' mean
    ce = -torch.log(torch.tensor([0.2, 0.1]))  # the best action's own probability, not renormalised
    torch.testing.assert_close(loss, (w * ce).sum() / w.sum())
    assert stats == pytest.approx({"p_best": (0.4 + 0.2) / 2, "picks_best": 0.0})  # these renormalised
    # the gradient raises the best action only (the softmax over the vocabulary lowers the rest)
    logits = torch.zeros(5, requires_grad=True)
    loss_and_stats(logits, owner, rewards)[0].backward()
    assert logits.grad[0] < 0 and logits.grad[3] < 0 and (logits.grad[[1, 2, 4]] == 0).all()
    # a state whose actions all pay the same weighs nothing
    tie = loss_and_stats(torch.zeros(2, requires_grad=True), [0, 0], [[0.01, 0.01]])[0]
    assert tie.item() == 0.0


def test_the_decision_anchor_is_the_kl_from_the_starting_policy_over_the_actions():
    owner, rewards = [0, 0, 1, 1, 1], [[0.03, -0.01], [0.0, 0.02, 0.01]]
    refs = [[math.log(0.3), math.log(0.1)], [math.log(0.2)] * 3]
    # as the starting policy, up to the mass off the actions: the renormalised KL is 0
    same = torch.log(torch.tensor([0.15, 0.05, 0.1, 0.1, 0.1]))
    assert loss_and_stats(same, owner, rewards, refs)[1].item() == pytest.approx(0.0, abs=1e-7)
    logps = torch.log(torch.tensor([0.1, 0.3, 0.1, 0.1, 0.3])).requires_grad_()
    _, kl, stats = loss_and_stats(logps, owner, rewards, refs)
    expected = (
        0.75 * math.log(0.75 / 0.25)
        + 0.25 * math.log(0.25 / 0.75)
        + sum(math.log((1 / 3) / q) / 3 for q in (0.2, 0.2, 0.6))
    ) / 2
    assert kl.item() == pytest.approx(expected, rel=1e-5) and stats["decision_kl"] == pytest.approx(expected, rel=1e-5)
    kl.backward()  # pulls each action back towards its starting share
    assert logps.grad[0] < 0 < logps.grad[1] and logps.grad[4] > 0 > logps.grad[2]


def _config() -> dict:
    """The objectives' tiny run: two rounds, its base warmed up on the answer format (both
    labels, every position word), so that groups' rewards differ by construction, not by the
    luck of a random model's text."""
    cfg = tiny_config(run="objectives", rounds=2)
    cfg["model"]["tiny"]["format_warmup_steps"] = 40
    return cfg


@pytest.fixture(scope="module")
def before_training(tmp_path_factory):
    """The jobs no objective changes (none of them reads the train section): prices, base
    model, states, audit, round 1's rollout and scores and the base policy's evaluation, run
    once for the four objectives below; each reruns from there as a user who changes only
    train.objective does."""
    d = tmp_path_factory.mktemp("objectives")
    write_config(d / "config.yaml", _config())
    targets = ["results/objectives/buffer/round_1.duckdb", "results/objectives/eval/round_0/metrics.json"]
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", d / "config.yaml", "--cores", "2", *targets, cwd=d)
    return d


@pytest.mark.slow
@pytest.mark.parametrize(
    "objective, extra",
    [("dpo", {}), ("best_answers", {}), ("full_information", {"lr_scheduler": "constant", "per_device_batch_size": 4}),
     ("full_information", {"full_information": {"rationale": "best_answers", "decision_anchor": 1.0}}),
     ("full_information", {"full_information": {"rationale": "best_answers", "decision_anchor": 1.0,
                                                "decision_epochs": 1, "decision_rounds": 1}})],
    ids=["dpo", "best_answers", "full_information", "full_information-rationale", "full_information-decision-first"],
)  # fmt: skip
def test_each_objective_runs_every_stage_of_the_dag(objective, extra, before_training, tmp_path):
    name, d = "objectives", tmp_path / "run"
    shutil.copytree(before_training, d)  # the files' times too, and Snakemake's records of what made them
    cfg = _config()
    cfg["train"] = {**cfg["train"], "objective": objective, **extra}
    write_config(d / "config.yaml", cfg)
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", d / "config.yaml", "--cores", "2",
               "--quiet", "rules", cwd=d)  # fmt: skip
    # train.objective reruns training and all that follows it, nothing before
    rerun = {"grpo_train": 2, "rollout": 1, "score": 1, "evaluate": 2, "summarize": 1, "all": 1}
    assert job_counts(proc.stderr) == rerun, proc.stderr
    res = d / "results" / name
    summary = json.loads((res / "metrics.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1, 2]
    trained = rationale = 0
    for r in (1, 2):
        log = (res / "logs" / f"grpo_train_round_{r}.log").read_text()
        before, after = (load_file(res / "policy" / f"round_{q}" / "model" / "model.safetensors") for q in (r - 1, r))
        moved = any(not torch.equal(before[k], after[k]) for k in before)
        if "the policy goes on unchanged" in log:  # a round with nothing to learn from (no pair, no best)
            assert not moved and objective != "full_information"
            continue
        trained += 1
        assert f"grpo_train: round {r}, {objective} on 8 groups x 4" in log and moved
        train_log = pd.read_csv(res / "policy" / f"round_{r}" / "train_log.csv")
        column = {"dpo": "rewards/margins", "best_answers": "mean_token_accuracy"}.get(
            objective, "full_information/p_best"
        )
        assert train_log[column].notna().any()
        if "lr_scheduler" in extra:  # two steps of 4 states, both at the set rate (linear: the second at half)
            assert train_log.learning_rate.dropna().tolist() == [cfg["train"]["learning_rate"]] * 2
        if "full_information" in extra:  # the best answers' loss, in the rounds with a best answer above its mean
            best = objective_rows.best_answers(buffer.replay(res / "buffer" / f"round_{r}.duckdb", name, r))
            key = "full_information/best_answers_loss"
            assert (key in train_log and train_log[key].notna().any()) == (not best.empty)
            rationale += not best.empty
            # the decision held at the round's starting policy from round 2 on, not at the base;
            # with decision_epochs, at where the answer word's own passes left it; past
            # decision_rounds, no passes of its own and no term of its own: the reasons alone
            decides = r <= (extra["full_information"].get("decision_rounds") or r)
            first = extra["full_information"].get("decision_epochs", 0) if decides else 0
            assert ("full_information/decision_kl" in train_log) == (r > 1 or first > 0)
            assert ("trains the reasons alone" in log) == (not decides)
            if first:  # its pass's rows first in the log (a step of 8 states, its summary), then the reasons'
                assert train_log.phase.tolist()[:2] == ["decision"] * 2 and train_log.phase.isna().sum() == 2
                assert train_log.loc[train_log.phase.isna(), "full_information/decision_kl"].notna().any()
                assert "full_information: the answer word alone, 1 epoch(s), 1 step(s): p_best" in log
            else:
                assert "phase" not in train_log and "the answer word alone" not in log
    assert trained >= 1 and (rationale >= 1 or "full_information" not in extra)
    if objective == "full_information":  # its rows: every action's text, as the policy's tokenizer spells it
        samples = buffer.replay(res / "buffer" / "round_1.duckdb", name, 1)
        outcomes = buffer.outcomes(res / "buffer" / "round_1.duckdb", name, samples.state_id.unique())
        priced = get("market").action_rewards(
            outcomes, {"invalid_penalty": -0.05, "returns": "simple", "cost_bps": 0, "benchmark": "none"}
        )
        tok = AutoTokenizer.from_pretrained(res / "policy" / "round_0" / "model")
        rows = objective_rows.action_rows(samples, priced, tok)
        assert len(rows) == 8
        for row, sid in zip(rows.itertuples(), samples.groupby("group").state_id.first(), strict=True):
            mine = priced[priced.state_id == sid]
            assert [tok.decode(a) for a in row.action_ids] == list(mine.action)
            assert row.rewards == pytest.approx(list(mine.reward))


@pytest.mark.slow
def test_dynamic_sampling_runs_every_stage_of_the_dag(before_training, tmp_path):
    name, d = "objectives", tmp_path / "run"
    shutil.copytree(before_training, d)
    cfg = _config()
    cfg["rollout"] = {**cfg["rollout"], "dynamic_sampling": 1.5}  # 8 states asked, at most 12 drawn
    write_config(d / "config.yaml", cfg)
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", d / "config.yaml", "--cores", "2",
               "--quiet", "rules", cwd=d)  # fmt: skip
    # evaluate reads the rollout section (its sampling), so the base's evaluation reruns too
    rerun = {"rollout": 2, "score": 2, "grpo_train": 2, "evaluate": 3, "summarize": 1, "all": 1}
    assert job_counts(proc.stderr) == rerun, proc.stderr
    res = d / "results" / name
    summary = json.loads((res / "metrics.json").read_text())
    assert [g["round"] for g in summary["rollout_groups"]] == [1, 2]
    for r, groups in zip((1, 2), summary["rollout_groups"], strict=True):
        drawn = re.search(r"dynamic sampling: (\d+) informative groups .* of (\d+) states drawn, 8 asked, at most 12",
                          (res / "logs" / f"rollout_round_{r}.log").read_text())  # fmt: skip
        assert drawn and groups["groups"] == int(drawn[2]) and 8 <= groups["groups"] <= 12
        log = (res / "logs" / f"grpo_train_round_{r}.log").read_text()
        assert "of the round's groups without reward spread" in log
        informative = round(groups["groups"] * (1 - groups["zero_spread"]))
        if informative >= 2:  # a step takes 2 groups (8 samples of 4)
            assert f"grpo on {informative} groups x 4" in log
        else:
            assert "the policy goes on unchanged" in log
    loader = importlib.machinery.SourceFileLoader("evidence", str(ROOT / "benchmarks" / "evidence"))
    evidence = importlib.util.module_from_spec(importlib.util.spec_from_loader("evidence", loader))
    loader.exec_module(evidence)
    table = evidence.groups_table(summary["rollout_groups"]).splitlines()
    assert len(table) == 4 + 2 and table[-1].startswith(f"| 2 | {summary['rollout_groups'][1]['groups']} | ")


BEST = [  # BATCH with trained samples: the first's two (one's middle token an environment's, mask 0),
    # none for the second, one for the third
    {
        **BATCH[0],
        "best_ids": [BATCH[0]["prompt_ids"] + [9, 3, 4], BATCH[0]["prompt_ids"] + [8, 2]],
        "best_mask": [[0] * 5 + [1, 0, 1], [0] * 6 + [1]],
        "best_weight": [1.5, -0.5],
    },
    {**BATCH[1], "best_ids": [], "best_mask": [], "best_weight": []},
    {**BATCH[2], "best_ids": [BATCH[2]["prompt_ids"] + [6, 7]], "best_mask": [[0] * 7 + [1, 1]], "best_weight": [1.0]},
]
TRAINED = [(x["best_ids"][i], x["best_mask"][i], x["best_weight"][i]) for x in BEST for i in range(len(x["best_ids"]))]


@pytest.mark.parametrize("opening", [[], [7, 3, 1]])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_the_rationale_adds_each_best_samples_likelihood_on_the_models_tokens(attn, opening, tmp_path):
    from transformers import TrainingArguments

    from hitchhiker.training.full_information import FullInformationTrainer

    model = _llama()
    model.config._attn_implementation = attn
    best = _opened(BEST, opening)
    trained = [
        (x["best_ids"][i], x["best_mask"][i], x["best_weight"][i]) for x in best for i in range(len(x["best_ids"]))
    ]

    def alone(ids, mask):  # the trained tokens' log-likelihood, from one unpadded forward pass of the row
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits.float(), -1)[0]
        return sum(logp[i - 1, t] for i, (t, m) in enumerate(zip(ids, mask, strict=True)) if m)

    actions = [_alone(model, x["prompt_ids"], a) for x in best for a in x["action_ids"]]
    expected = torch.stack([*actions, *(alone(ids, mask) for ids, mask, _ in trained)])
    grads = {}
    for share in (True, False):
        model.zero_grad()
        logps, owner = action_logps(model, best, share_prompt=share, eager=attn == "eager", best=True)
        assert owner == [0, 0, 1, 1, 1, 2, 2, 0, 0, 2]  # the actions, then the trained samples
        torch.testing.assert_close(logps, expected, atol=1e-5, rtol=1e-5)
        (logps * torch.linspace(0.5, 1.5, len(logps))).sum().backward()
        grads[share] = torch.cat([p.grad.flatten() for p in model.parameters()])
    torch.testing.assert_close(grads[True], grads[False], atol=1e-5, rtol=1e-4)
    # the trainer adds best_answers' loss: the trained tokens' negative log-likelihood, each
    # sample's times its weight, over the 5 trained tokens
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    loss = {
        rationale: FullInformationTrainer(model=model, args=args, share_prompt=True, rationale=rationale).compute_loss(
            model, {"rows": best}
        )
        for rationale in ("untrained", "best_answers")
    }
    sft = -sum(w * alone(ids, mask) for ids, mask, w in trained) / 5
    torch.testing.assert_close(loss["best_answers"] - loss["untrained"], sft, atol=1e-5, rtol=1e-5)
    # past train.full_information.decision_rounds the answer word's term is left out: the reasons' alone
    reasons = FullInformationTrainer(model=model, args=args, share_prompt=True, rationale="best_answers",
                                     decision=False)  # fmt: skip
    torch.testing.assert_close(reasons.compute_loss(model, {"rows": best}), sft, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("share", [True, False])
def test_a_reason_pushed_down_stops_at_its_floor_under_the_rounds_starting_policy(share):
    """reference_logps gives the pushed-down sample's (BEST's weight -0.5) logprobs under the
    model as it is, and nothing for the others; with them as best_ref, the sample's logprob is
    unchanged, its gradient as without them while it is above the floor and none once the
    model makes its token PUSHED_DOWN_CLIP less likely than the reference did."""
    from hitchhiker.training.full_information import PUSHED_DOWN_CLIP, reference_logps

    model = _llama()
    refs = reference_logps(model, BEST, share, eager=False, batch_size=2)
    assert [[len(r) for r in x] for x in refs] == [[0, 2], [], [0]]  # the completion [8, 2], 2 trained alone
    plain, _ = action_logps(model, BEST, share_prompt=share, eager=False, best=True)
    # row 8: that sample; its first token is not trained
    assert refs[0][1][0] == 0 and refs[0][1][1] == pytest.approx(float(plain[8].detach()), abs=1e-5)

    def grad_of_pushed(ref_shift: float) -> tuple[torch.Tensor, torch.Tensor]:
        batch = [{**x, "best_ref": [[v + ref_shift for v in r] for r in refs[i]]} for i, x in enumerate(BEST)]
        model.zero_grad()
        logps, _ = action_logps(model, batch, share_prompt=share, eager=False, best=True)
        logps[8].backward()
        return logps.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])

    above, g_above = grad_of_pushed(0.0)  # at its reference: above the floor
    below, g_below = grad_of_pushed(-math.log(1 - PUSHED_DOWN_CLIP) + 0.01)  # already past it
    torch.testing.assert_close(above, plain.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(below, plain.detach(), atol=1e-5, rtol=1e-5)
    assert g_above.abs().sum() > 0 and g_below.abs().sum() == 0


def test_in_bf16_the_starting_policys_passes_compute_as_the_trainers_step_and_as_without_autocast():
    """A bf16 model with a round's fresh LoRA adapter: the reference passes (reference_logps,
    action_reference) under bf16 autocast with LoRA's inputs in bf16 give bit for bit what they
    give without (PEFT's float32 LoRA path: the adapter adds exactly zero either way) and what
    the trainer's own forward pass gives at its first step; the model's mode is left as it was."""
    from peft import LoraConfig, get_peft_model

    from hitchhiker.training.full_information import action_reference, reference_logps

    model = get_peft_model(_llama().to(torch.bfloat16), LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    model.train()
    plain = reference_logps(model, BEST, True, eager=False, batch_size=2), action_reference(model, BEST, True, False, 2)
    fast = (
        reference_logps(model, BEST, True, False, 2, bf16=True),
        action_reference(model, BEST, True, False, 2, bf16=True),
    )
    assert model.training and fast == plain and any(fast[0][0][1])
    with torch.autocast(
        "cpu", dtype=torch.bfloat16
    ):  # the trainer's step (bf16=True) on the pushed-down sample's state
        step, _ = action_logps(model.eval(), BEST[:1], share_prompt=True, eager=False, best=True, per_token=True)
    assert step[3, :2].tolist() == fast[0][0][1]  # its actions' rows, the first sample's, its own


def test_with_each_answer_each_reason_is_trained_after_its_answer_word_by_what_grounding_paid_it(
    tok, base_run, tmp_path
):
    """rollout.each_answer's targets: every sample after its answer word (the answer is
    full_information's action term's alone), weighed by what the grounding terms paid or
    charged its reason in units of the reason bonus, whatever the answer and whether or not
    the record paid it; a reason that was neither paid nor charged (it argues nothing and
    claims nothing) trains nothing, however its answer's other reasons fared."""
    yes, no = (tok(a, add_special_tokens=False)["input_ids"] for a in ("yes", "no"))
    because = tok(" because it rained", add_special_tokens=False)["input_ids"]
    dry = tok(" because it was dry", add_special_tokens=False)["input_ids"]
    forecast = tok(" because it will rain tomorrow", add_special_tokens=False)["input_ids"]
    end = [tok.eos_token_id]
    samples = pd.DataFrame(
        {
            "group": ["1/a"] * 5 + ["1/b"] * 4,
            "round": [1] * 9,
            "state_id": ["a"] * 5 + ["b"] * 4,
            "sample_idx": [0, 1, 2, 3, 4, 0, 1, 2, 3],
            "prompt_ids": [[5, 6]] * 9,
            "completion_ids": [
                yes + because + end,
                yes + forecast,
                no + dry,
                no + because + end,
                no + forecast,
                yes + forecast,
                yes + forecast,
                no + forecast,
                no + forecast,
            ],
            # the bonus 0.25 times what it paid, less 0.1 a claim: 0.2 paid, 0.1 paid, one false claim
            "grounding": [0.2, 0.0, 0.1, -0.1, 0.0, 0.0, 0.0, 0.0, 0.0],
            "reward": [1.2, 1.0, 0.1, -0.1, 0.0, 0.0, 0.0, 1.0, 1.0],
            "reason_paid": [0.8, 0.0, 0.4, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        }
    )
    samples["model_mask"] = samples["completion_ids"].map(lambda c: [1] * len(c))
    # rollout wrote the answer word and "because" (a behaviour logprob of 0), the model the rest
    opener = len(tok(" because", add_special_tokens=False)["input_ids"])
    written = [len(yes if c[: len(yes)] == yes else no) + opener for c in samples["completion_ids"]]
    samples["logprobs"] = [
        [0.0] * w + [-0.5] * (len(c) - w) for c, w in zip(samples["completion_ids"], written, strict=True)
    ]
    priced = pd.DataFrame(
        {"state_id": ["a", "a", "b", "b"], "action": ["yes", "no"] * 2, "reward": [1.0, 0.0, 0.0, 1.0]}
    )
    rows = objective_rows.action_rows(samples, priced, tok, reason_bonus=0.25).set_index("group")
    # state a: the paid reasons imitated (0.8, 0.4), the false one pushed down (-0.4), the
    # restated forecasts left out, after either answer
    trained = sorted(zip(map(tuple, rows.best_ids["1/a"]), rows.best_weight["1/a"], strict=True))
    expected = sorted(
        [((5, 6, *yes, *because, *end), 0.8), ((5, 6, *no, *dry), 0.4), ((5, 6, *no, *because, *end), -0.4)]
    )
    assert [ids for ids, _ in trained] == [ids for ids, _ in expected]
    assert [w for _, w in trained] == pytest.approx([w for _, w in expected])
    # trained after the answer word, and in a reason pushed down only after the written
    # "because" and before the end of the turn, which every reason shares (pushed down, they
    # taught the answer to stop after "because", or never to stop)
    for ids, mask, w in zip(rows.best_ids["1/a"], rows.best_mask["1/a"], rows.best_weight["1/a"], strict=True):
        untrained = 2 + len(yes if ids[2 : 2 + len(yes)] == yes else no) + (opener if w < 0 else 0)
        ends = 1 if w < 0 else 0
        assert ids[-1] == end[0] or ends == 0
        assert mask == [0] * untrained + [1] * (len(ids) - untrained - ends) + [0] * ends
    # the reasons pushed down weigh what their claims cost, whatever the imitated ones weigh:
    # two false reasons beside one paid 0.4 are pushed down at -0.4 each
    pushed = objective_rows.answer_reasons(samples.iloc[[2, 3, 3]].assign(grounding=[0.1, -0.1, -0.1]), [yes, no], 0.25)
    assert pushed.weight.tolist() == pytest.approx([0.4, -0.4, -0.4])
    # under train.full_information.push_budget they weigh at most that many times the imitated
    # ones, in all (0.8 against 0.4 at 1: each at -0.2), and where none is imitated none is pushed
    budget = [[yes, no], 0.25, None, 1.0]
    pushed = objective_rows.answer_reasons(samples.iloc[[2, 3, 3]].assign(grounding=[0.1, -0.1, -0.1]), *budget)
    assert pushed.weight.tolist() == pytest.approx([0.4, -0.2, -0.2])
    pushed = objective_rows.answer_reasons(samples.iloc[[2, 3, 3]].assign(grounding=[0.5, -0.1, -0.1]), *budget)
    assert pushed.weight.tolist() == pytest.approx([2.0, -0.4, -0.4])  # within the budget: unscaled
    assert objective_rows.answer_reasons(samples.iloc[[3, 3]].assign(grounding=[-0.1, -0.1]), *budget).empty
    # state b: no reason paid or charged: no target, the answer still priced
    assert rows.best_ids["1/b"] == [] and rows.best_mask["1/b"] == [] and rows.best_weight["1/b"] == []
    assert rows.action_ids["1/b"] == [yes, no] and rows.rewards["1/b"] == [0.0, 1.0]
    plain = objective_rows.action_rows(samples, priced, tok).set_index("group")
    assert plain.best_ids["1/b"] == [[5, 6, *no, *forecast]] and plain.best_weight["1/b"] == [1.0]
    assert plain.best_mask["1/b"] == [[0, 0] + [1] * (len(no) + len(forecast))]
    # full_information's build gives the reason pushed down its floors (its logprobs under the
    # round's starting policy, here the tiny base) and none to the others, then trains on them
    from hitchhiker import policy
    from hitchhiker.training.objectives import full_information

    model = policy.load_model(base_run / "policy" / "round_0", {"trust_remote_code": False, "dtype": "float32"})
    cfg = {
        "train": {
            "share_prompt": None,
            "full_information": {
                "rationale": "best_answers",
                "decision_epochs": 0,
                "decision_rounds": None,
                "push_budget": None,
            },
            "per_device_batch_size": 2,
        },
        "rollout": {"each_answer": True},
        "grounding": {"reason_bonus": 0.25},
    }
    common = dict(output_dir=str(tmp_path), use_cpu=True, report_to=[], max_steps=1, per_device_train_batch_size=2)
    trainer = full_information.build(cfg, samples, priced, model, tok, None, common)
    data = trainer.train_dataset.to_pandas()
    lengths = {float(w): len(r) for w, r in zip(data.best_weight[0], data.best_ref[0], strict=True)}
    assert lengths == pytest.approx({0.8: 0, 0.4: 0, -0.4: len(no) + len(because) + 1})
    assert trainer.train().training_loss != 0


@pytest.mark.slow
def test_each_answer_on_the_pairwise_market_runs_every_stage(tmp_path):
    """configs/signal_claims.yaml's design with the tiny model: rollout writes "A because" and
    "B because", full_information trains the decision and each paid reason, evaluate runs."""
    cfg = tiny_config(run="market", market={"states": {"formats": ["pairwise"]}})
    cfg["model"]["tiny"]["format_warmup_steps"] = 40
    cfg["rollout"] |= {"each_answer": True, "samples_per_state": 4}
    cfg["train"] |= {"objective": "full_information", "full_information": {"rationale": "best_answers"}}
    cfg["grounding"] = {"unsupported_claim_penalty": 0.01, "reason_bonus": 0.01}
    write_config(tmp_path / "config.yaml", cfg)
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2", cwd=tmp_path)
    res = tmp_path / "results" / "market"
    rolled = pd.read_parquet(res / "rollouts" / "round_1.parquet").sort_values(["state_id", "sample_idx"])
    led = rolled.completion.str.extract(r"^(A|B) because")[0]
    assert led.groupby(rolled.state_id).apply(tuple).map(("A", "A", "B", "B").__eq__).all()
    summary = json.loads((res / "metrics.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1]
    assert "full_information/p_best" in pd.read_csv(res / "policy" / "round_1" / "train_log.csv")
