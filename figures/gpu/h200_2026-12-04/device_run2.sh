# The paper-mini notebooks from 07_dial on, on the GPU, over the CPU-made 04_models–06 artifacts carried in .whl/pm.
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade .whl/*.whl > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 3; }
mkdir -p /work/exp/gpu && cp -r .whl/pm /work/exp/gpu/pm && cp -r nbs /work/exp/gpu/pm/nbs
echo "install and copy: $(( $(date +%s) - t0 )) s"
cd /work/exp/gpu/pm
( while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; sleep 0.5; done ) > $OUT/mem.txt 2>/dev/null &
timeout 270 calirl reproduce --profile paper-mini --only 07 09_grpo 09a 10 11 14 --force -p device=cuda -p dtype=bfloat16 -p rollout_backend=hf -p openai_base_url=http://127.0.0.1:8431/v1 2>&1
echo "reproduce rc $?; peak GPU memory $(sort -n $OUT/mem.txt | tail -1) MiB; total $(( $(date +%s) - t0 )) s"
cat figures/paper-mini/table2.md 2>/dev/null
cp figures/paper-mini/table2.md figures/paper-mini/grpo_training_summary.md $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz runs/paper-mini/notebooks/*.log runs/paper-mini/state.json 2>/dev/null
