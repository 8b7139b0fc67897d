"""Notebook-first reproduction kit for calibrated interactive RL (multi-turn GRPO against a calibrated user simulator) and DIAL

Modules:

- `calirl.users`: Everything that plays the user (App. C.1, §3.3, §4.1): one interface — a batch of conversations in, a batch of user messages with terminate flags out — implemented by the tiny world's scripted human (its real user, oracle and evaluator), the artifact simulator (a stand-in for an uncalibrated prompted simulator), and LLM simulators over any generation backend."""

__version__ = "0.1.0"
