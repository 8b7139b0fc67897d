# One device call: install the carried wheels (.whl/) next to the image's torch, then the GPU check's given parts.
# usage: bash device_run.sh <timeout seconds> <gpu_check.py arguments…>
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
t0=$(date +%s)
lim=$1; shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade .whl/*.whl > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 3; }
echo "install: $(( $(date +%s) - t0 )) s"
python3 -c "import sys, torch, transformers, trl, calirl, papermill; print(sys.executable, torch.__version__, transformers.__version__, trl.__version__, torch.cuda.get_device_name(0))" || exit 5
timeout $lim python3 .ci/gpu_check.py "$@" 2>&1 | tee $OUT/gpu_check.log
echo "rc ${PIPESTATUS[0]}; device call total $(( $(date +%s) - t0 )) s"
