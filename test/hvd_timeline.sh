#!/bin/sh
# test/hvd_timeline.sh: HVD_TIMELINE at 2 and 3 ranks, through
# test/mpirun.sh: test_hvd_timeline checks its own results and the file's
# shape, and that allreduces took the shared-memory path (all ranks are on
# this node) or, with HVD_INTRANODE=ring, the ring; here python3 (when
# installed) parses the file as JSON and looks for an event naming each
# request, in "name" or anywhere in "args".
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
missing = [n for n in names if not any(mentions(ev, n) for ev in events)]
if missing:
    sys.exit("FAIL: %s: no event names %s" % (path, ", ".join(missing)))
print("%s: %d events, every name found" % (path, len(events)))
PY
done
script_finish hvd_timeline
