#!/usr/bin/env bash
# Here, in the repository root: fetch the wheels vLLM 0.26.0 needs beyond the H200 image (vllm_wheels.txt), pack them in
# one tar and cut it into chunks that one device call can carry beside the working tree (.vw/cNN/part, 60,000,000 bytes).
# vLLM 0.26.0 is the newest release that pins the image's torch (2.11.0); TRL 1.16 accepts vLLM 0.22-0.31.
set -euo pipefail
grep -qx "/.vw/" .git/info/exclude 2>/dev/null || echo "/.vw/" >> .git/info/exclude
rm -rf .vw && mkdir -p .vw/wheels
P=""; for n in 17 24 27 28 31 34 35; do P="$P --platform manylinux_2_${n}_x86_64"; done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 $P --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 --platform linux_x86_64 --implementation cp --abi cp312 --abi abi3 --abi none \
  -d .vw/wheels -r .ci/vllm_carry/vllm_wheels.txt
test "$(ls .vw/wheels | wc -l)" = "$(grep -c . .ci/vllm_carry/vllm_wheels.txt)"
tar cf .vw/all.tar -C .vw wheels
sha256sum .vw/all.tar | cut -d' ' -f1 > .vw/all.sha256
split -b 60000000 -d -a 2 .vw/all.tar .vw/part_
for p in .vw/part_*; do k=${p##*_}; mkdir -p .vw/c$k; mv $p .vw/c$k/part_$k; done
cp .vw/all.sha256 .vw/c00/
rm -rf .vw/wheels .vw/all.tar
echo "$(ls -d .vw/c* | wc -l) chunks:"; ls -d .vw/c*
