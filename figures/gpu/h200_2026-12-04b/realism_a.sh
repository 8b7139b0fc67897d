# 08_realism on the GPU, call 1 of 3: the kit's wheels (.whl/, with sentence-transformers and mauve-text) into the image's venv.
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade .whl/*.whl > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 3; }
python3 -c "import torch, transformers, calirl, sentence_transformers, mauve; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))" || exit 5
echo "call 1: $(( $(date +%s) - t0 )) s"
