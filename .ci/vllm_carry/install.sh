# On the device, after every chunk arrived (and after `device_run.sh`'s install of the kit's own wheels): join, check,
# install with no index and no dependency resolution, and import vLLM. Then run, e.g.,
#   timeout 560 python3 .ci/gpu_check.py --parts tests rollout paper-mini-vllm --logs $OUT
set -u
cd /tmp/vw || exit 2
cat part_* > all.tar && echo "$(cat all.sha256)  all.tar" | sha256sum -c || exit 3
tar xf all.tar && rm all.tar part_*
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir wheels/*.whl > $OUT/pip_vllm.log 2>&1 || { tail -5 $OUT/pip_vllm.log; exit 4; }
python3 -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)" 2>&1 | tail -5
python3 -m pip check 2>&1 | grep -i vllm | head -10
