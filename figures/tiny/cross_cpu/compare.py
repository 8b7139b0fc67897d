"""The tiny profile on two CPUs, side by side: the committed `figures/tiny/` (AVX-512 machine) against a run of the same
recipe on another machine, whose tables are copied to `figures/tiny/cross_cpu/run/`. Usage, from the project root:
python figures/tiny/cross_cpu/compare.py > figures/tiny/cross_cpu/comparison.md"""
import sys
from pathlib import Path
import pandas as pd
root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
A, B = root / "figures/tiny", root / "figures/tiny/cross_cpu/run"
names = ("AVX-512 (committed)", "AVX2 (this folder)")

def side(fa:str, key:list, cols:list) -> pd.DataFrame:
    "Columns `cols` of table `fa` in both runs, joined on `key`."
    a, b = (pd.read_csv(d / fa).set_index(key)[cols].add_suffix(f" · {n}") for d, n in zip((A, B), names))
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
