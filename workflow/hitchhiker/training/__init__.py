"""What grpo_train runs: the objectives (objectives/, one module each), the trainers TRL lacks or that we
make faster (replay_trainer, dpo_trainer, full_information), and the shared-prompt step
they use (shared_prompt, lm_head, attention)."""
