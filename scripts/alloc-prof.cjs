// Preloaded (node --require) into each process test-e2e starts when DWS_ALLOC_PROF=<dir> is set:
// samples what the process allocates, garbage included (V8's sampling heap profiler with collected
// objects kept), and writes <DWS_ALLOC_PROF_DIR>/<pid>.heapprofile when it exits. What a workload
// allocates per step does not move with the machine's speed; it drives the garbage collector and how
// much heap V8 keeps committed (RSS). `npx tsx bench/src/profile-top.ts <dir>` reads the files.
'use strict';
const dir = process.env.DWS_ALLOC_PROF_DIR;
if (dir) {
  const inspector = require('node:inspector');
  const fs = require('node:fs');
  const path = require('node:path');
  const session = new inspector.Session();
  session.connect();
  session.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  // An in-process session answers synchronously, so this runs to the end inside 'exit'.
  process.on('exit', () => {
    session.post('HeapProfiler.stopSampling', (err, res) => {
      if (err) return;
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `${process.pid}.heapprofile`), JSON.stringify(res.profile));
    });
  });
}
