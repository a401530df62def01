#!/bin/sh
# test/hvd_timeline.sh: HVD_TIMELINE at 2 and 3 ranks, through
# test/mpirun.sh: test_hvd_timeline checks its own results and the file's
# shape, and that allreduces took the shared-memory path (all ranks are on
# this node) or, with HVD_INTRANODE=ring, the ring; here python3 (when
# installed) parses the file as JSON and looks for an event naming each
# request, in "name" or anywhere in "args". Then a device trace, of
# synthetic_benchmark at 2 ranks on the emulated device: as JSON, each
# fused group's pack, allreduce and unpack on a lane "device" (named by
# its metadata) of its tensors' rows, end to end, beside the host lane's.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup hvd_timeline
# Keep in step with the names in test/test_hvd_timeline.c.
names="tl.blocking tl.async.0 tl.async.1 tl.async.2 tl.bcast tl.gather"
for run in 2:auto:SHM 3:auto:SHM 2:ring:RING; do
    np=${run%%:*} path=${run#*:} phase=${path#*:}_ALLREDUCE path=${path%:*}
    trace=$dir/timeline_np${np}_$path.json
    HVD_INTRANODE=$path script_launch "np=$np HVD_INTRANODE=$path" "$np" \
        test/test_hvd_timeline "$trace" "$phase"
    command -v python3 > /dev/null 2>&1 || {
        echo "note: no python3, the JSON is not parsed"
        continue
    }
    # shellcheck disable=SC2086
    python3 - "$trace" $names << 'PY' || rc=1
import json, sys
path, names = sys.argv[1], sys.argv[2:]
try:
    events = json.load(open(path))
except (OSError, ValueError) as e:
    sys.exit("FAIL: %s: %s" % (path, e))
if not isinstance(events, list) or not events:
    sys.exit("FAIL: %s: not a non-empty JSON array of events" % path)
def mentions(ev, name):
    return isinstance(ev, dict) and (name in str(ev.get("name", ""))
                                     or name in json.dumps(ev.get("args", {})))
odd = 'tl.odd "q" \\ \t'  # test_hvd_timeline.c's, escaped in the file
missing = [n for n in names + [odd]
           if not any(mentions(ev, n) or ev.get("args", {}).get("tensor") == n
                      for ev in events)]
if missing:
    sys.exit("FAIL: %s: no event names %s" % (path, ", ".join(missing)))
print("%s: %d events, every name found" % (path, len(events)))
PY
done

trace=$dir/timeline_device.json
HVD_DEVICE_EMULATE=1 HVD_TIMELINE=$trace script_launch "device lane" 2 \
    examples/synthetic_benchmark --device cuda --num-iters 2 \
    --num-batches-per-iter 2 --num-warmup-batches 1
if command -v python3 > /dev/null 2>&1; then
    python3 - "$trace" << 'PY' || rc=1
import json, sys
path = sys.argv[1]
try:
    events = json.load(open(path))
except (OSError, ValueError) as e:
    sys.exit("FAIL: %s: %s" % (path, e))
lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
         if e.get("name") == "thread_name"}
phases = ("MEMCPY_IN_FUSION_BUFFER", "SHM_ALLREDUCE",
          "MEMCPY_OUT_FUSION_BUFFER")
device, host = {}, {}
for e in events:
    if e.get("ph") != "X" or e["name"] not in phases:
        continue
    side = device if e["tid"] == 1 else host
    side.setdefault(e["pid"], []).append(e)
    if lanes.get((e["pid"], e["tid"])) != ("device" if e["tid"] else "host"):
        sys.exit("FAIL: %s: lane %d of row %d is not named" %
                 (path, e["tid"], e["pid"]))
if not device or sorted(device) != sorted(host):
    sys.exit("FAIL: %s: rows with device phases %s, with host ones %s" %
             (path, sorted(device), sorted(host)))
for pid, evs in device.items():
    if len(evs) != len(host[pid]) or len(evs) % 3:
        sys.exit("FAIL: %s: row %d has %d device phases, %d host ones" %
                 (path, pid, len(evs), len(host[pid])))
    for k in range(0, len(evs), 3):
        group = evs[k:k + 3]
        if [e["name"] for e in group] != list(phases):
            sys.exit("FAIL: %s: row %d: %s" % (path, pid, group))
        for a, b in zip(group, group[1:]):
            if a["dur"] < 0 or abs(a["ts"] + a["dur"] - b["ts"]) > 0.01:
                sys.exit("FAIL: %s: row %d: %s does not end where %s "
                         "starts" % (path, pid, a, b))
print("%s: %d rows, each group's phases on the device lane end to end" %
      (path, len(device)))
PY
fi
script_finish hvd_timeline
