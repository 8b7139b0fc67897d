# One device call: install the carried wheels next to the image's torch, then the prepared GPU check.
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
t0=$(date +%s)
PY=python3
if ! $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade .whl/*.whl > $OUT/pip.log 2>&1; then
  echo "pip into the image's venv failed:"; tail -5 $OUT/pip.log
  SP=$($PY -c 'import site; print(site.getsitepackages()[0])')
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 3
  $PY -m venv --without-pip /tmp/venv || exit 4
  VSP=$(ls -d /tmp/venv/lib/python3*/site-packages)
  echo /tmp/site > $VSP/a_site.pth; echo $SP > $VSP/b_torch.pth
  cp /tmp/site/bin/* /tmp/venv/bin/; sed -i '1s|.*|#!/tmp/venv/bin/python|' /tmp/venv/bin/calirl /tmp/venv/bin/transformers /tmp/venv/bin/jupyter* /tmp/venv/bin/papermill 2>/dev/null
  PY=/tmp/venv/bin/python
fi
echo "install: $(( $(date +%s) - t0 )) s"
$PY -m pip check 2>&1 | head -12
$PY -c "import sys, torch, transformers, trl, calirl, papermill; print(sys.executable, torch.__version__, transformers.__version__, trl.__version__, torch.cuda.get_device_name(0))" || exit 5
ls $(dirname $($PY -c 'import sys; print(sys.executable)'))/ | grep -E "^(calirl|transformers)$"
timeout 470 $PY .ci/gpu_check.py 2>&1 | tee $OUT/gpu_check.log
echo "rc ${PIPESTATUS[0]}; device call total $(( $(date +%s) - t0 )) s"
