"""Table 2 with and without length-sorted chunks in GRPO's optimizer pass, on the same machine and the same upstream
models: `figures/tiny/cross_cpu/run/` (the AVX2 machine's tiny run, `grpo_chunk` = 0) against this folder (the same
run's base policy, oracle traces and simulators, `09_grpo`–`11_case_studies` rerun with `-p grpo_chunk=8`).
Usage, from the project root: python figures/tiny/cross_cpu/grpo_chunk/compare.py > figures/tiny/cross_cpu/grpo_chunk/comparison.md"""
import sys
from pathlib import Path
import pandas as pd
root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
A, B = root / "figures/tiny/cross_cpu/run", root / "figures/tiny/cross_cpu/grpo_chunk"
names = ("grpo_chunk 0", "grpo_chunk 8")
t = [pd.read_csv(d / "table2.csv").set_index("method")[["MATH Acc", "DocEdit BLEU", "Average"]] for d in (A, B)]
print("## Table 2 (×100, mean ± std over evaluation seeds)\n\n" + pd.concat(dict(zip(names, t)), axis=1).to_markdown() + "\n")
p = [pd.read_csv(d / "table2_paired.csv").set_index(["comparison", "task"]) for d in (A, B)]
fmt = lambda r: f"{r['diff']:+.1f} [{r['ci_low']:+.1f}, {r['ci_high']:+.1f}]"
print("## Paired differences (×100, 95 % bootstrap CI over items)\n\n" + pd.DataFrame({n: x.apply(fmt, axis=1) for n, x in zip(names, p)}).to_markdown() + "\n")
pools = [pd.read_csv(d / "time_profile_pools.csv").set_index("notebook").loc["09_grpo"] for d in (A, B)]
print("## GRPO's worker pool, core-seconds (both runs idle; the policies differ, see README.md)\n\n"
      + pd.DataFrame(dict(zip(names, pools))).round(1).to_markdown() + "\n")
