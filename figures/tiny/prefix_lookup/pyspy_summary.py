"""Shares of a py-spy raw profile's samples inside `calirl.rollout.rollout`: by named frames anywhere on the stack
(a sample counts for every name on its stack, so shares overlap), then by the innermost calirl line.

Usage: python pyspy_summary.py PROFILE (py-spy's `-f raw` output, optionally gzipped)."""
import collections, gzip, re, sys

NAMES = ["HFBackend.generate", "LeanDecoder.forward", "LMSimulator.respond", "PolicySpeaker.speak", "_prefill",
         "apply_chat_template", "chat_prompt_ids", "_compact", "_remember", "sample_next", "PolicySpeaker._fits",
         "PrefixCache.longest", "PrefixCache.tokens", "PrefixCache.put"]
path = sys.argv[1]
lines = (gzip.open(path, "rt") if path.endswith(".gz") else open(path)).read().splitlines()
total, named, inner = 0, collections.Counter(), collections.Counter()
for line in lines:
    stack, n = line.rsplit(" ", 1)
    if "rollout (calirl/rollout.py" not in stack: continue
    total += int(n)
    for name in NAMES:
        if name in stack: named[name] += int(n)
    last = [f for f in stack.split(";") if "calirl/" in f][-1]
    inner[last.split(" (")[0] + " " + re.search(r"\((calirl/[^)]*)\)", last).group(1)] += int(n)
print(f"{total} samples inside rollout\n\nby name on the stack:")
for k, v in named.most_common(): print(f"{v / total:6.1%}  {k}")
print("\nby innermost calirl line (top 12):")
for k, v in inner.most_common(12): print(f"{v / total:6.1%}  {k}")
