import { runStandalone } from '@dws/runtime';
import { startApprovals } from './main.js';

await runStandalone('approvals', 8292, startApprovals);
