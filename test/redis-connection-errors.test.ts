// A wrong Redis URL is named, with its cause, in one error line (docs: operations.md, "Redis connection errors"): the
// gateway composed as `tollgate serve` composes it, against real processes that are not the Redis it expects: nothing
// listening, an HTTP server, a redis-server that refuses the password (an ACL user), a plain redis-server reached over TLS. Each
// gives one line naming the URL without credentials and the cause, however many times the client retries; a change
// of cause gives one more.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import { Metrics } from '../src/observability/metrics.js';
import { connectionCause } from '../src/storage/connection-problems.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger, waitFor } from './helpers/limits.js';
import { freePort, TestRedis } from './helpers/redis-server.js';
import { makeCertificates, type TestCertificates } from './helpers/tls.js';

const PASSWORD = 'right-pass-81f3';
const WRONG = 'wrong-pass-c70a';
let locked: TestRedis;
let plain: TestRedis;
let certs: TestCertificates;
const servers: Server[] = [];

beforeAll(async () => {
  // An ACL user with a password (the default user stays open, so the test helper can see the server start).
  locked = await TestRedis.start(['--user', 'app', 'on', `>${PASSWORD}`, '~*', '&*', '+@all']);
  plain = await TestRedis.start();
  certs = makeCertificates();
}, 120_000);

afterAll(async () => {
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  await locked?.stop();
  await plain?.stop();
  certs?.remove();
});

/**
 * Composes a gateway against `redis` (it starts degraded: the wrong Redis never becomes ready), lets the client retry
 * for a while, and returns the connection error lines logged.
 */
async function failureLines(redis: Record<string, unknown>, then?: (lines: () => Array<Record<string, unknown>>) => Promise<void>) {
  const log = captureLogger();
  let gateway: ComposedGateway | undefined;
  try {
    gateway = await composeGateway({
      config: testConfig({ upstream: { url: 'http://127.0.0.1:9' }, redis: { prefix: 'conn:', commandTimeoutMs: 100, ...redis } }),
      logger: log.logger,
      metrics: new Metrics(),
      upstreamCheckTimeoutMs: 200,
    });
    const lines = () => log.lines.filter((l) => String(l.msg).startsWith('redis connection failed'));
    await waitFor(() => lines().length > 0, 'a connection error line', 30_000);
    // Retries go on (50 ms, 100 ms, ... between them): more than a few within this time, each failing the same way.
    await sleep(800);
    await then?.(lines);
    return { lines: lines(), all: JSON.stringify(log.lines) };
  } finally {
    await gateway?.close();
  }
}

describe('a Redis URL that does not reach the Redis it names', () => {
  it('nothing listening: one line, "refused", naming the URL', async () => {
    const port = await freePort();
    const { lines } = await failureLines({ url: `redis://127.0.0.1:${port}` });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, cause: 'refused', redis: `redis://127.0.0.1:${port}` });
    expect(String(lines[0]!.msg)).toBe(`redis connection failed: refused (redis://127.0.0.1:${port})`);
  });

  it('an HTTP server on the port: one line, "not a Redis server"; then nothing listens: one more, "refused"', async () => {
    const server = createServer((_req, res) => res.end('not redis'));
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const { lines } = await failureLines({ url: `redis://127.0.0.1:${port}` }, async (seen) => {
      expect(seen()).toHaveLength(1);
      expect(seen()[0]).toMatchObject({ cause: 'not a Redis server' });
      // The cause changes: the HTTP server goes away.
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await waitFor(() => seen().length > 1, 'a second line for the new cause', 30_000);
      await sleep(500);
    });
    expect(lines.map((l) => l.cause)).toEqual(['not a Redis server', 'refused']);
  });

  it('a wrong password (in the URL or the password field): one line, "auth failed", and the password in no line', async () => {
    const inUrl = await failureLines({ url: `redis://app:${WRONG}@127.0.0.1:${locked.port}` });
    expect(inUrl.lines).toHaveLength(1);
    expect(inUrl.lines[0]).toMatchObject({ cause: 'auth failed', redis: `redis://app:***@127.0.0.1:${locked.port}` });
    expect(inUrl.all).not.toContain(WRONG);
    const field = await failureLines({ url: `redis://127.0.0.1:${locked.port}`, username: 'app', password: WRONG });
    expect(field.lines).toHaveLength(1);
    expect(field.lines[0]).toMatchObject({ cause: 'auth failed' });
    expect(field.all).not.toContain(WRONG);
    expect(field.all).not.toContain(PASSWORD);
  });

  it('TLS to a port that speaks no TLS: one line, "TLS failed"', async () => {
    const { lines, all } = await failureLines({ url: `rediss://:${WRONG}@127.0.0.1:${plain.port}`, tls: { caFile: certs.caFile } });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ cause: 'TLS failed', redis: `rediss://:***@127.0.0.1:${plain.port}` });
    expect(all).not.toContain(WRONG);
  });

  it('a Redis that answers logs no connection error', async () => {
    const log = captureLogger();
    const gateway = await composeGateway({
      config: testConfig({ upstream: { url: 'http://127.0.0.1:9' }, redis: { url: `redis://app:${PASSWORD}@127.0.0.1:${locked.port}`, prefix: 'conn:' } }),
      logger: log.logger,
      metrics: new Metrics(),
      upstreamCheckTimeoutMs: 200,
    });
    try {
      await waitFor(() => log.messages().includes('redis connected'), 'connected');
      expect(log.messages().filter((m) => m.startsWith('redis connection failed'))).toEqual([]);
    } finally {
      await gateway.close();
    }
  });

  it('names the cause of errors as Node, OpenSSL and Redis word them', () => {
    const err = (message: string, code?: string, name?: string) => Object.assign(new Error(message), code ? { code } : {}, name ? { name } : {});
    expect(connectionCause(err('connect ECONNREFUSED 127.0.0.1:1', 'ECONNREFUSED'), false)).toBe('refused');
    expect(connectionCause(err('connect ETIMEDOUT', 'ETIMEDOUT'), false)).toBe('timeout');
    expect(connectionCause(err('Protocol error, got "H" as reply type byte', undefined, 'ParserError'), false)).toBe('not a Redis server');
    expect(connectionCause(err('WRONGPASS invalid username-password pair or user is disabled.'), false)).toBe('auth failed');
    expect(connectionCause(err('NOAUTH Authentication required.'), false)).toBe('auth failed');
    expect(connectionCause(err('write EPROTO ...:wrong version number', 'EPROTO'), true)).toBe('TLS failed');
    expect(connectionCause(err('self-signed certificate', 'DEPTH_ZERO_SELF_SIGNED_CERT'), true)).toBe('TLS failed');
    expect(connectionCause(err('Client network socket disconnected before secure TLS connection was established', 'ECONNRESET'), true)).toBe('TLS failed');
    expect(connectionCause(err('read ECONNRESET', 'ECONNRESET'), false)).toBe('unreachable');
    expect(connectionCause(err('Unknown RESP type 72 "H". Please report this.'), false)).toBe('not a Redis server');
    // A connect timeout: over TLS with the TCP connection up, the handshake got no answer; else the host gave none.
    expect(connectionCause(err('connect ETIMEDOUT', 'ETIMEDOUT'), true, true)).toBe('TLS failed');
    expect(connectionCause(err('connect ETIMEDOUT', 'ETIMEDOUT'), true, false)).toBe('timeout');
    expect(connectionCause('something else', false)).toBe('error');
  });
});
