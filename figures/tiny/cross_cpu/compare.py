"""The tiny profile on two CPUs, side by side: the committed `figures/tiny/`, `figures/validity/` and `figures/ablation/`
(AVX-512 machine) against runs of the same recipes on another machine, whose tables are copied to
`figures/tiny/cross_cpu/run/`, `validity/` and `ablation/`. Usage, from the project root:
python figures/tiny/cross_cpu/compare.py > figures/tiny/cross_cpu/comparison.md"""
import sys
from pathlib import Path
import pandas as pd
root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
A, B = root / "figures/tiny", root / "figures/tiny/cross_cpu/run"
names = ("AVX-512 (committed)", "AVX2 (this folder)")

def side(fa:str, key:list, cols:list, dirs:tuple=(A, B)) -> pd.DataFrame:
    "Columns `cols` of table `fa` in both runs (folders `dirs`), joined on `key`."
    a, b = (pd.read_csv(d / fa).set_index(key)[cols].add_suffix(f" · {n}") for d, n in zip(dirs, names))
    return a.join(b)

def show(title:str, df:pd.DataFrame) -> None:
    print(f"## {title}\n\n{df.to_markdown()}\n")

show("The base policy's checks (04c)", side("base_policy_checks.csv", ["task"], ["base", "perfect_asker", "headroom", "A_ask", "A_ask_low"]))
show("The Phase I simulator's calibration (06, 08)", side("simulator_calibration.csv", ["check"], ["measured", "met"]))
show("Table 2 (×100, mean ± std over evaluation seeds)", side("table2.csv", ["method"], ["MATH Acc", "DocEdit BLEU", "Average"]))
p = side("table2_paired.csv", ["comparison", "task"], ["diff", "ci_low", "ci_high"])
fmt = lambda r, n: f"{r[f'diff · {n}']:+.1f} [{r[f'ci_low · {n}']:+.1f}, {r[f'ci_high · {n}']:+.1f}]"
show("Paired differences (×100, 95 % bootstrap CI over items)", pd.DataFrame({n: [fmt(r, n) for _, r in p.iterrows()] for n in names}, index=p.index))
c = [pd.read_csv(d / "claims.csv") for d in (A, B)]
claims = pd.DataFrame({"claim": c[0]["claim"], "evidence": c[0]["evidence"], **{f"{n}: effect [CI] → verdict": x["effect"].astype(str) + " " + x["ci"].astype(str) + " → " + x["verdict"] for n, x in zip(names, c)}})
show("The papers' claims", claims.set_index(["claim", "evidence"]))

V = (root / "figures/validity", root / "figures/tiny/cross_cpu/validity")
show("Validity: each user model against the real user over the 13 policies (12_validity, `[validity]`)",
     side("validity_table3.csv", ["simulator"], ["r_issue", "r_success", "rho_success", "kl_issue_categories"], V).round(3))
ab = [pd.read_csv(d / "validity_ab.csv") for d in V]
show("Validity: A/B comparisons replicated (same direction and significance as the real user), of 6",
     pd.DataFrame({n: x[x.user != "real"].groupby("user", sort=False)["replicates"].sum() for n, x in zip(names, ab)}))
noisy = lambda x: x[(x.treatment == "noise0.6") & (x.metric == "session_issue_rate")].set_index("user")[["diff", "p", "replicates"]].round({"diff": 3, "p": 4})
show("Validity: the noisy copy's issue rate, the comparison that splits the user models", pd.concat({n: noisy(x) for n, x in zip(names, ab)}, axis=1))
AB = (root / "figures/ablation", root / "figures/tiny/cross_cpu/ablation")
key = ["simulator", "reward_path", "strength"]
show("Ablation: success against the real user, its drop from the real-user-trained policy, first-turn asking (13_artifacts, `[ablation]`; mean ± std over 3 training seeds)",
     side("ablation.csv", key, ["success", "drop", "asks_first"], AB))
for d, n in zip(AB, names):          # each run's dose-response covers the two artifacts that run found most harmful
    show(f"Ablation: dose-response, {n}", pd.read_csv(d / "ablation_dose.csv").set_index(key)[["success", "drop"]])
