"""Per-cell seconds (papermill's metadata) of the same notebooks in two `runs/paper-mini/notebooks` folders.
usage: python cells.py <folder A> <folder B> [notebook …]; prints each notebook's slowest cells in A beside B."""
import json, sys
from pathlib import Path

def durations(folder:Path, nb:str) -> list[float]:
    cells = json.loads((folder / f"{nb}.ipynb").read_text())["cells"]
    return [c["metadata"].get("papermill", {}).get("duration") or 0.0 for c in cells]

a, b = Path(sys.argv[1]), Path(sys.argv[2])
for nb in sys.argv[3:] or ["05_rollout", "06_simulator_sft", "07_dial", "09_grpo", "09a_collabllm", "10_evaluate"]:
    da, db = durations(a, nb), durations(b, nb)
    print(f"{nb}: {sum(da):.1f} s vs {sum(db):.1f} s")
    for i in sorted(range(len(da)), key=lambda i: -da[i])[:3]:
        print(f"   cell {i:>3}: {da[i]:6.1f} s vs {db[i]:6.1f} s")
