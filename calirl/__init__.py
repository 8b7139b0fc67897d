"""Notebook-first reproduction kit for calibrated interactive RL (multi-turn GRPO against a calibrated user simulator) and DIAL

Modules:

- `calirl.backends`: How the kit samples from a model (§4.2, App. B.2/B.4): a batch of token-id prompts in, completions out with their token ids and the log-probabilities of the sampled tokens — the quantities multi-turn GRPO needs — from a Hugging Face model (CPU or GPU), from vLLM (GPU, paper scale), or, text only, from any OpenAI-compatible HTTP endpoint (the large evaluation simulator and judge).
- `calirl.models`: Where every model of the kit comes from (App. B.2): one factory that loads a hub id or a local folder (bf16 on GPU, safetensors only, optional LoRA), and a builder for the tiny world's models — a BPE tokenizer trained locally, ChatML templates whose trained span is the assistant turn for the policy (Phase II, §4.2, App. B.4) and the **user** turn for the simulator (Phase I), and randomly initialised Qwen2/Gemma3 models a few hundred thousand parameters large. The generation backends that run these models live in `04a_backends`.
- `calirl.rollout`: The rollout engine of §4.2 and Algorithm 1: B prompts × G samples, the user speaks first, policy and user alternate, every live conversation advances in one batched call per side; per trajectory the transcript, token ids, the policy mask, logprobs and the termination reason, saved as Parquet. Plus the LM simulator (App. B.2/B.4) and `calirl bench rollout`.
- `calirl.users`: Everything that plays the user (App. C.1, §3.3, §4.1): one interface — a batch of conversations in, a batch of user messages with terminate flags out — implemented by the tiny world's scripted human (its real user, oracle and evaluator), the artifact simulator (a stand-in for an uncalibrated prompted simulator), and LLM simulators over any generation backend."""

__version__ = "0.1.0"
