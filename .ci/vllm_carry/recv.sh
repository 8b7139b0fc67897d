# On the device, once per chunk (each call carries one `.vw/cNN`): keep the chunk in /tmp/vw, which outlives the call
# while the machine stays warm (idle_release_s is 30 s: send the next call at once).
mkdir -p /tmp/vw && cp .vw/c*/* /tmp/vw/ && echo "$(ls /tmp/vw | grep -c part_) chunks in /tmp/vw, $(du -sb /tmp/vw | cut -f1) bytes"
