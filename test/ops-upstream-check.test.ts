// The upstream shorthand's readiness check on OutboundClient: any HTTP answer is up (a 404, a redirect, which is not
// followed), a refused or silent upstream is down within the check's time.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpUpstreamCheck } from '../src/observability/ops.js';
import { OutboundClient } from '../src/outbound/client.js';

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string; seen: IncomingMessage[] }> {
  const seen: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    seen.push(req);
    handler!(req, res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

let client: OutboundClient;
const servers: Server[] = [];
beforeAll(() => {
  client = new OutboundClient();
});
afterAll(async () => {
  await client.close();
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

describe('httpUpstreamCheck', () => {
  it('is up on any answer, a 404 or a redirect (not followed); says who asks', async () => {
    const elsewhere = await listen((_req, res) => res.end());
    const up = await listen((req, res) => {
      if (req.url === '/moved') res.writeHead(302, { location: `${elsewhere.url}/` }).end();
      else res.writeHead(404).end('no such path');
    });
    servers.push(elsewhere.server, up.server);
    await expect(httpUpstreamCheck(client, up.url, '/healthz', 1000).check()).resolves.toBeUndefined();
    await expect(httpUpstreamCheck(client, up.url, '/moved', 1000).check()).resolves.toBeUndefined();
    expect(up.seen.map((r) => [r.url, r.headers['user-agent']])).toEqual([
      ['/healthz', 'tollgate-readiness-check'],
      ['/moved', 'tollgate-readiness-check'],
    ]);
    expect(elsewhere.seen).toHaveLength(0);
  });

  it('is down when refused, and when silent within its time', async () => {
    const silent = await listen(() => undefined);
    servers.push(silent.server);
    await expect(httpUpstreamCheck(client, 'http://127.0.0.1:1', '/healthz', 1000).check()).rejects.toMatchObject({ kind: 'connect' });
    const startedAt = Date.now();
    await expect(httpUpstreamCheck(client, silent.url, '/healthz', 200).check()).rejects.toMatchObject({ kind: 'timeout' });
    expect(Date.now() - startedAt).toBeLessThan(1200);
  });
});
