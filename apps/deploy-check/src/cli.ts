// `pnpm deploy:check`: renders deploy/helm/dws (defaults, values-nats-cluster.yaml, existing
// secrets), validates every object, docker-compose.yml and the Dockerfile; one line per check.
import { runChecks } from './checks.js';

const report = await runChecks();
process.stdout.write(report.lines.join('\n') + '\n');
const failed = report.lines.filter((l) => l.startsWith('FAIL')).length;
const passed = report.lines.filter((l) => l.startsWith('ok')).length;
process.stdout.write(`deploy-check: ${passed} passed, ${failed} failed\n`);
process.exit(report.ok ? 0 : 1);
