// `ops` in the config: /readyz and /metrics move to a listener of their own (loopback by default), the public gateway
// port answers them 404, and /healthz stays on the gateway port for load balancers. The built CLI as users run it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText } from '../src/config/load.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, assertBuilt } from './helpers/cli.js';
import { freePort } from './helpers/redis-server.js';
import { TestUpstream, echo } from './helpers/upstream.js';

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; type: string; body: string }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

describe('the ops listener', () => {
  let dir: string;
  let up: TestUpstream;
  const KEY = generateKey();

  beforeAll(async () => {
    assertBuilt();
    dir = mkdtempSync(join(tmpdir(), 'tollgate-ops-'));
    up = await TestUpstream.start();
    up.behaviour = echo;
  });

  afterAll(async () => {
    await CliProcess.killAll();
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves /readyz and /metrics on its own port only; /healthz stays on the gateway port', async () => {
    const opsPort = await freePort();
    const path = join(dir, 'gateway.yaml');
    writeFileSync(
      path,
      [
        'server: { host: 127.0.0.1, port: 0 }',
        `upstream: { url: "${up.url}" }`,
        `ops: { port: ${opsPort} }`,
        `keys: [{ id: ops-test, plan: free, sha256: "${hashKey(KEY)}" }]`,
        '',
      ].join('\n'),
    );
    const proc = CliProcess.start(['serve', '--config', path]);
    try {
      const line = await proc.waitForLog('tollgate gateway listening');
      const gateway = String(line.url);
      expect(line.opsUrl).toBe(`http://127.0.0.1:${opsPort}`);
      const ops = String(line.opsUrl);

      expect((await get(`${gateway}/v1/pets/1`, { authorization: `Bearer ${KEY}` })).status).toBe(200);
      for (const path of ['/readyz', '/metrics']) {
        const r = await get(`${gateway}${path}`);
        expect(r.status, path).toBe(404);
        expect(JSON.parse(r.body)).toMatchObject({ code: 'not_found', status: 404 });
      }
      expect((await get(`${gateway}/healthz`)).status).toBe(200);

      expect((await get(`${ops}/healthz`)).status).toBe(200);
      const ready = await get(`${ops}/readyz`);
      expect(ready.status).toBe(200);
      expect(JSON.parse(ready.body)).toMatchObject({ status: 'ready', checks: { upstream: 'up' } });
      const metrics = await get(`${ops}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.type).toMatch(/^text\/plain/);
      // The gateway's traffic is counted in the registry the ops port serves.
      expect(metrics.body).toMatch(/tollgate_http_requests_total\{route="\/v1\/\*",method="GET",status="200"\} 1/);
      const other = await get(`${ops}/v1/pets/1`);
      expect(other.status).toBe(404);
      expect(JSON.parse(other.body)).toMatchObject({ code: 'not_found' });
    } finally {
      proc.signal('SIGTERM');
      expect((await proc.waitForExit()).code).toBe(0);
    }
  });

  it('needs a port of its own', () => {
    const result = parseConfigText('server: { port: 8080 }\nops: { port: 8080 }\n');
    expect(result).toEqual({ ok: false, errors: ['ops.port: the ops listener needs a port of its own, not server.port, got 8080'] });
  });

  it('a port that cannot be bound: the gateway refuses to start, exit 1', async () => {
    const path = join(dir, 'taken.yaml');
    // An address this machine does not have (TEST-NET-3): binding fails at once.
    writeFileSync(path, `server: { host: 127.0.0.1, port: 0 }\nupstream: { url: "${up.url}" }\nops: { host: 203.0.113.1, port: 9 }\n`);
    const proc = CliProcess.start(['serve', '--config', path]);
    const exit = await proc.waitForExit();
    expect(exit.code).toBe(1);
    expect(proc.stderr).toMatch(/^error: .*EADDRNOTAVAIL/m);
  });
});
