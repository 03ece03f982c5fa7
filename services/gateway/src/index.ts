export { startGateway, credentialsBanner, type GatewayHandle } from './main.js';
