"Spread of a fresh DIAL discriminator's held-out accuracy over training seeds, same simulator and sessions (07's setup, tiny profile). Usage, from the project root after a tiny run: python figures/tiny/disc_seed_spread/disc_seed_spread.py <task> <n_seeds> [root] [fresh] | grep '^{"task"' > <task>[-fresh].jsonl (the trainer logs to stdout too); `fresh`: discriminators from random weights instead of the simulator's"
import sys, time, json
import numpy as np
from pathlib import Path
from calirl.core import load_profile, model_source, seed_everything
from calirl.pipeline import notebook_parameters
from calirl.backends import HFBackend
from calirl.models import load_model
from calirl.tasks import load_items
from calirl.components import make_user, task_models, user_for
from calirl.sim_sft import oracle_traces
from calirl.dial import train_discriminator, p_real, disc_metrics, accuracy_resamples, interval
root = Path(sys.argv[3]) if len(sys.argv) > 3 else Path.cwd()   # the project root, holding runs/tiny of a finished tiny run
prof = load_profile("tiny", root / "settings.ini")
g = notebook_parameters(root / "nbs/07_dial.ipynb", prof, root / "runs/tiny", root / "figures/tiny")
globals().update(g)
run_dir = str(root / "runs/tiny")
seed_everything(seed)
pol_model, pol_tok = load_model(model_source(run_dir, "policy_base"), device=device, dtype=dtype)
policy = HFBackend(pol_model, pol_tok)
task = sys.argv[1]
fresh = len(sys.argv) > 4 and sys.argv[4] == "fresh"
split = load_items(world, task, dial_sessions // len(tasks), n_eval_items, seed + 1, data_source, data_revision)
max_len = {"math-chat": max_len_math, "docedit-chat": max_len_docedit}
sess = lambda user, its, s: [t.messages for t in oracle_traces(policy, pol_tok, user, its, H, max_new_tokens, train_temperature, s,
                                                              oracle_ask_share, max_len[task], policy_prompt)]
oracle = user_for("oracle", g)
real_train, real_eval = sess(oracle, split[0], seed), sess(oracle, split[1], seed + 7)
cur = task_models(model_source(run_dir, "simulator_sft"))[task]
user = make_user("lm-simulator", source=cur, backend="hf", device=device, dtype=dtype, max_new_tokens=max_new_tokens, temperature=train_temperature, seed=seed)
sim_tok = user.tokenizer
sim_train, sim_eval = sess(user, split[0], seed), sess(user, split[1], seed + 7)
y = [1] * len(real_eval) + [0] * len(sim_eval)
out = []
for s in range(int(sys.argv[2])):
    t0 = time.time()
    disc = train_discriminator(cur, sim_tok, real_train, sim_train, disc_epochs, disc_lr, seed=s, threads=1, fresh=fresh)
    p = p_real(disc, sim_tok, real_eval + sim_eval)
    acc = disc_metrics(p, y).loc["all", "accuracy"]
    lo, hi = interval(accuracy_resamples(p, y, seed=seed))
    out.append(dict(task=task, init="random" if fresh else "simulator", disc_seed=s, accuracy=round(float(acc), 4), low=round(lo, 4), high=round(hi, 4), seconds=round(time.time() - t0, 1)))
    print(json.dumps(out[-1]), flush=True)
a = np.array([o["accuracy"] for o in out])
print(json.dumps(dict(task=task, init="random" if fresh else "simulator", n=len(a), mean=round(float(a.mean()), 4), std=round(float(a.std(ddof=1)), 4), min=float(a.min()), max=float(a.max()))))
