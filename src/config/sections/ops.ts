// ops: a second listener for /readyz and /metrics, so the platform's probes and scrapes can sit on a port clients never
// reach. Its port must differ from the gateway's (rules/ports-and-workers.ts: that rule reads server too).
import { z } from 'zod';
import { listenerTls } from './listener-tls.js';

export const ops = z.strictObject({
  host: z.string().min(1).default('127.0.0.1').describe('Address of the operations listener. Loopback by default: metrics and readiness are for the platform, not clients.'),
  port: z.number().int().min(0).max(65535).describe('Port of the operations listener (0 picks a free one); must differ from server.port.'),
  tls: listenerTls.optional().describe('HTTPS on the operations listener, as server.tls.'),
});

export type OpsConfig = z.output<typeof ops>;
