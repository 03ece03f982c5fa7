// jest globalSetup of the e2e project: the infra of jest-infra-setup.js, then one
// fresh build of the services (scripts/build.mjs) for the whole session, so no
// test runs stale bundles. DWS_BUILT=1 reaches the workers: the harness
// (test-e2e/src/processes.ts ensureBuilt) does not build again.
import { build } from './build.mjs';
import infraSetup from './jest-infra-setup.js';

export default async function setup() {
  const teardown = await infraSetup();
  await build({ quiet: true });
  process.env.DWS_BUILT = '1';
  return teardown;
}
