import { runStandalone } from '@dws/runtime';
import { credentialsBanner, startGateway } from './main.js';

await runStandalone('gateway', 8288, async (cfg, infra) => {
  const gw = await startGateway(cfg, infra);
  process.stdout.write(credentialsBanner(`http://${cfg.HOST}:${gw.port}`, gw.credentials, cfg.SERVICE_AUTH === 'on') + '\n');
  return gw;
});
