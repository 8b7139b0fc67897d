"""Tables of two runs of the same recipe, file by file: byte-identical, or which columns differ.

Usage: python compare.py NEW OLD [STATE]. NEW and OLD are `figures/<profile>/` folders; only the tables (`.csv`) and
their Markdown twins that NEW's run wrote (newer than the first start in its `state.json`, STATE, when given) are
compared, with OLD's file of the same name. For a CSV that differs, the columns whose values differ are listed."""
import json
import sys
from pathlib import Path
import pandas as pd

new, old = Path(sys.argv[1]), Path(sys.argv[2])
since = 0.0
if len(sys.argv) > 3:
    st = json.loads(Path(sys.argv[3]).read_text())
    starts = [float(r["started_at"]) for r in st.values() if isinstance(r, dict) and r.get("started_at")]   # seconds since the epoch
    since = min(starts) if starts else 0.0
files = sorted(p for p in new.iterdir() if p.suffix in (".csv", ".md") and p.stat().st_mtime >= since and (old / p.name).is_file())
same, differ = [], []
for p in files:
    if p.read_bytes() == (old / p.name).read_bytes():
        same.append(p.name)
        continue
    why = "differs"
    if p.suffix == ".csv":
        a, b = pd.read_csv(p), pd.read_csv(old / p.name)
        if list(a.columns) != list(b.columns) or len(a) != len(b): why = f"shape or columns differ ({a.shape} vs {b.shape})"
        else: why = "columns that differ: " + ", ".join(c for c in a.columns if not a[c].equals(b[c]))
    differ.append((p.name, why))
print(f"{len(files)} tables written by the run and present in both: {len(same)} byte-identical, {len(differ)} differ\n")
for name, why in differ: print(f"- `{name}`: {why}")
print("\nbyte-identical: " + ", ".join(f"`{n}`" for n in same))
