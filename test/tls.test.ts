// TLS both ways: HTTPS (and mutual TLS) on the gateway's listeners, certificates re-read on SIGHUP without dropping a
// connection, and HTTPS to services' targets with a private CA, a client certificate and a servername, the health
// checks included; bad TLS config is one line per problem from `config check`. Certificates are made per run (openssl).
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import { connect as netConnect } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashAdminToken } from '../src/admin/tokens.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import type { Logger } from '../src/observability/logger.js';
import { CliProcess, assertBuilt, runCli, startServe, tempDir } from './helpers/cli.js';
import { Runtime } from '../src/routing/runtime.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { makeCertificates, type TestCertificates } from './helpers/tls.js';
import { TestUpstream } from './helpers/upstream.js';

// Every `serve` here is a child process, and the machine may be busy: generous bounds.
const SLOW = 60_000;
let certs: TestCertificates;
let dir: ReturnType<typeof tempDir>;
const KEY = generateKey();
const ADMIN_TOKEN = `tga_${'a'.repeat(43)}`;

beforeAll(() => {
  assertBuilt();
  certs = makeCertificates();
  dir = tempDir();
}, SLOW);

afterAll(async () => {
  await CliProcess.killAll();
  certs?.remove();
  dir?.remove();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The server certificate's serial, as the client saw it. */
  serial: string;
  reusedSocket: boolean;
}

/** One HTTPS request (trusting the test CA unless told otherwise); rejects on a TLS or connection error. */
function get(url: string, opts: RequestOptions & { timeoutMs?: number } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ca: readCa(), ...opts }, (res) => {
      const chunks: Buffer[] = [];
      const serial = (res.socket as TLSSocket).getPeerCertificate().serialNumber;
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString(), serial, reusedSocket: req.reusedSocket }),
      );
    });
    req.setTimeout(opts.timeoutMs ?? 5000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

function readCa(): Buffer {
  return readFileSync(certs.caFile);
}

function serialOf(certFile: string): string {
  // The X509Certificate serial, as getPeerCertificate gives it (upper-case hex).
  return new X509Certificate(readFileSync(certFile)).serialNumber;
}

/** A gateway config for `serve`: a plain upstream, one static key, the listener's tls block as given. */
function serveConfig(up: TestUpstream, extra: Record<string, unknown>): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    log: { level: 'info' },
    plans: { basic: { perMinute: 1000, perDay: 100_000 } },
    keys: [{ id: 'static-tls', plan: 'basic', sha256: hashKey(KEY) }],
    ...extra,
  };
}

const auth = { authorization: `Bearer ${KEY}` };

describe('HTTPS on the gateway listener', () => {
  it(
    'serves /v1 over HTTPS with the usual headers; plain HTTP on the port gets no answer and does no harm',
    async () => {
      const up = await TestUpstream.start();
      const file = dir.write(
        'https.yaml',
        serveConfig(up, { server: { host: '127.0.0.1', port: 0, tls: { certFile: certs.certFile, keyFile: certs.keyFile } } }),
      );
      const { proc, url, port } = await startServe(file);
      try {
        expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
        const res = await get(`${url}/v1/pets`, { headers: auth });
        expect(res.status).toBe(200);
        expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
        expect(res.headers['x-ratelimit-limit']).toBe('1000');
        expect(res.headers['x-ratelimit-remaining']).toBe('999');
        expect(res.serial).toBe(serialOf(certs.certFile));
        expect(up.seen.at(-1)!.headers['x-forwarded-proto']).toBe('https');
        // Without a key: the gateway's own JSON refusal, over TLS too.
        const refused = await get(`${url}/v1/pets`);
        expect(refused.status).toBe(401);
        expect(JSON.parse(refused.body).code).toMatch(/^[a-z_]+$/);

        // A client speaking plain HTTP to the TLS port: no HTTP answer, the connection closed, the gateway still serves.
        const plain = await new Promise<string>((resolve) => {
          const s = netConnect(port, '127.0.0.1', () => s.write('GET /v1/pets HTTP/1.1\r\nHost: x\r\n\r\n'));
          let got = '';
          s.on('data', (d: Buffer) => (got += d.toString('latin1')));
          s.on('error', () => {});
          s.on('close', () => resolve(got));
          setTimeout(() => s.destroy(), 3000).unref();
        });
        expect(plain).not.toMatch(/^HTTP\/1\.1 200/);
        expect((await get(`${url}/v1/pets`, { headers: auth })).status).toBe(200);
        expect(proc.running).toBe(true);
      } finally {
        await proc.stop();
        await up.close();
      }
    },
    SLOW,
  );

  it(
    'with caFile, refuses a client without a certificate, or with one from another CA, and serves one the CA signed',
    async () => {
      const up = await TestUpstream.start();
      const stranger = certs.issue('stranger-client', { ca: 'other-ca', cn: 'stranger', client: true });
      const file = dir.write(
        'mtls.yaml',
        serveConfig(up, { server: { host: '127.0.0.1', port: 0, tls: { certFile: certs.certFile, keyFile: certs.keyFile, caFile: certs.caFile } } }),
      );
      const { proc, url } = await startServe(file);
      try {
        await expect(get(`${url}/v1/pets`, { headers: auth })).rejects.toThrow();
        await expect(get(`${url}/v1/pets`, { headers: auth, cert: readFileSync(stranger.certFile), key: readFileSync(stranger.keyFile) })).rejects.toThrow();
        expect(up.seen).toHaveLength(0);
        const ok = await get(`${url}/v1/pets`, { headers: auth, cert: readFileSync(certs.clientCertFile), key: readFileSync(certs.clientKeyFile) });
        expect(ok.status).toBe(200);
        expect(up.seen).toHaveLength(1);
      } finally {
        await proc.stop();
        await up.close();
      }
    },
    SLOW,
  );

  it(
    'minVersion TLSv1.3 refuses a TLSv1.2 client and serves a TLSv1.3 one',
    async () => {
      const up = await TestUpstream.start();
      const file = dir.write(
        'tls13.yaml',
        serveConfig(up, { server: { host: '127.0.0.1', port: 0, tls: { certFile: certs.certFile, keyFile: certs.keyFile, minVersion: 'TLSv1.3' } } }),
      );
      const { proc, url } = await startServe(file);
      try {
        await expect(get(`${url}/v1/pets`, { headers: auth, maxVersion: 'TLSv1.2' })).rejects.toThrow(/version|alert|protocol/i);
        const ok = await get(`${url}/v1/pets`, { headers: auth, minVersion: 'TLSv1.3' });
        expect(ok.status).toBe(200);
      } finally {
        await proc.stop();
        await up.close();
      }
    },
    SLOW,
  );

  it(
    'a reload that points the listener at an expired certificate is applied with the warning config check gives, not a plain "config reloaded"',
    async () => {
      const up = await TestUpstream.start();
      const good = certs.issue('expiring-good');
      const old = certs.expired('expiring-old');
      const live = { certFile: `${dir.dir}/expiring-live.crt`, keyFile: `${dir.dir}/expiring-live.key` };
      copyFileSync(good.certFile, live.certFile);
      copyFileSync(good.keyFile, live.keyFile);
      const file = dir.write('expiring.yaml', serveConfig(up, { server: { host: '127.0.0.1', port: 0, tls: live } }));
      const { proc } = await startServe(file);
      try {
        expect(proc.logs.filter((l) => l.msg === 'config warning')).toEqual([]);
        copyFileSync(old.certFile, live.certFile);
        copyFileSync(old.keyFile, live.keyFile);
        const at = proc.logs.length;
        proc.signal('SIGHUP');
        await proc.waitForLog('config reloaded', { after: at });
        const warnings = proc.logs.slice(at).filter((l) => l.msg === 'config warning');
        expect(warnings.map((l) => l.warning)).toEqual(['server.tls.certFile: the certificate expired on Jan  2 00:00:00 2020 GMT; clients will refuse it']);
        // The same words `config check` prints for the file.
        const checked = await runCli(['config', 'check', '--config', file]);
        expect(checked.stderr).toContain(`warning: ${String(warnings[0]!.warning)}`);
      } finally {
        await proc.stop();
        await up.close();
      }
    },
    SLOW,
  );

  it(
    're-reads the certificate on SIGHUP: a new connection sees the new one, an open keep-alive connection is still served; a bad file keeps the old',
    async () => {
      const up = await TestUpstream.start();
      const first = certs.issue('rotate-1');
      const second = certs.issue('rotate-2');
      const live = { certFile: `${dir.dir}/live.crt`, keyFile: `${dir.dir}/live.key` };
      copyFileSync(first.certFile, live.certFile);
      copyFileSync(first.keyFile, live.keyFile);
      const file = dir.write('rotate.yaml', serveConfig(up, { server: { host: '127.0.0.1', port: 0, keepAliveTimeoutMs: 30_000, tls: live } }));
      const { proc, url } = await startServe(file);
      const kept = new HttpsAgent({ keepAlive: true, maxSockets: 1, ca: readCa() });
      try {
        const before = await get(`${url}/v1/pets`, { headers: auth, agent: kept });
        expect(before.serial).toBe(serialOf(first.certFile));

        copyFileSync(second.certFile, live.certFile);
        copyFileSync(second.keyFile, live.keyFile);
        const at = proc.logs.length;
        proc.signal('SIGHUP');
        await proc.waitForLog('config reloaded', { after: at });

        const fresh = await get(`${url}/v1/pets`, { headers: auth, agent: false });
        expect(fresh.serial).toBe(serialOf(second.certFile));
        expect(fresh.serial).not.toBe(before.serial);
        const again = await get(`${url}/v1/pets`, { headers: auth, agent: kept });
        expect(again.status).toBe(200);
        expect(again.reusedSocket).toBe(true);
        expect(again.serial).toBe(before.serial);

        // A half-written certificate: the reload is refused, naming the field; the listener keeps the second one.
        writeFileSync(live.certFile, '-----BEGIN CERTIFICATE-----\nnot base64\n');
        const at2 = proc.logs.length;
        proc.signal('SIGHUP');
        const rejected = await proc.waitForLog('config reload rejected; the old config stays in force', { after: at2 });
        expect(JSON.stringify(rejected.errors)).toContain('server.tls.certFile');
        const still = await get(`${url}/v1/pets`, { headers: auth, agent: false });
        expect(still.serial).toBe(serialOf(second.certFile));
        expect(proc.running).toBe(true);
      } finally {
        kept.destroy();
        await proc.stop();
        await up.close();
      }
    },
    SLOW,
  );

  it(
    'serves the admin API over TLS (admin.tls), mutual TLS included',
    async () => {
      const up = await TestUpstream.start();
      const file = dir.write(
        'admin-tls.yaml',
        serveConfig(up, {
          admin: {
            port: 0,
            tokens: [{ id: 'portal', sha256: hashAdminToken(ADMIN_TOKEN) }],
            tls: { certFile: certs.certFile, keyFile: certs.keyFile, caFile: certs.caFile },
          },
        }),
      );
      const { proc, url } = await startServe(file);
      try {
        expect(url).toMatch(/^http:\/\//);
        const line = await proc.waitForLog('admin API listening');
        const adminUrl = String(line.url);
        expect(adminUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
        await expect(get(`${adminUrl}/plans`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).rejects.toThrow();
        const clientCert = { cert: readFileSync(certs.clientCertFile), key: readFileSync(certs.clientKeyFile) };
        const res = await get(`${adminUrl}/plans`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...clientCert });
        expect(res.status).toBe(200);
        expect(res.body).toContain('basic');
        const noToken = await get(`${adminUrl}/plans`, clientCert);
        expect(noToken.status).toBe(401);
      } finally {
        await proc.stop();
        await up.close();
      }
    },
    SLOW,
  );
});

/** A logger whose lines the test reads. */
function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) }) as unknown as Logger;
  return { logger, lines };
}

/** A plain-HTTP request to the in-process gateway. */
async function through(gw: TestGateway, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${gw.url}${path}`);
  return { status: res.status, body: await res.text() };
}

function secureConfig(targets: unknown[], tls: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}): ReturnType<typeof testConfig> {
  return testConfig({
    services: { secure: { targets, ...(tls ? { tls } : {}), retries: 0, ...extra } },
    routes: [{ path: '/s/*', service: 'secure', auth: 'none' }],
  });
}

describe('HTTPS to service targets', () => {
  const pem = (f: string) => readFileSync(f);
  let good: TestUpstream;
  let foreign: TestUpstream;
  beforeAll(async () => {
    good = await TestUpstream.start({ cert: pem(certs.certFile), key: pem(certs.keyFile) });
    const other = certs.issue('foreign-server', { ca: 'other-ca' });
    foreign = await TestUpstream.start({ cert: pem(other.certFile), key: pem(other.keyFile) });
  });
  afterAll(async () => {
    await good?.close();
    await foreign?.close();
  });

  it(
    'reaches an https:// target whose certificate the private CA signed: 200',
    async () => {
      const gw = await startTestGateway(secureConfig([good.url], { caFile: certs.caFile }));
      try {
        const res = await through(gw, '/s/hello');
        expect(res.status).toBe(200);
        expect(JSON.parse(res.body).url).toBe('/s/hello');
      } finally {
        await gw.close();
      }
    },
    SLOW,
  );

  it(
    'a target with a certificate from another CA is a connect failure: 502 bad_gateway, a log line with the code and target, counted for ejection, retried elsewhere',
    async () => {
      const { logger, lines } = capturingLogger();
      const gw = await startTestGateway(secureConfig([foreign.url], { caFile: certs.caFile }), { logger });
      try {
        const seenBefore = foreign.seen.length;
        const res = await through(gw, '/s/x');
        expect(res.status).toBe(502);
        expect(JSON.parse(res.body).code).toBe('bad_gateway');
        expect(foreign.seen.length).toBe(seenBefore);
        const line = lines.find((l) => l.msg === 'TLS handshake with the target failed: counted as a connect failure');
        expect(line).toMatchObject({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', target: foreign.url, service: 'secure', kind: 'tls' });
        expect(lines.find((l) => l.msg === 'upstream request failed')).toMatchObject({ kind: 'tls', code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', reached: false });
        const snap = gw.gateway.services.snapshot().find((s) => s.name === 'secure')!;
        expect(snap.targets[0]!.recentErrors.map((e) => e.kind)).toEqual(['tls']);
      } finally {
        await gw.close();
      }

      // Two targets, one foreign: the failed try is retried on the other (as a refused connection is), and the foreign
      // one is ejected after one failure.
      const gw2 = await startTestGateway(
        secureConfig([foreign.url, good.url], { caFile: certs.caFile }, { retries: 1, eject: { consecutiveFailures: 1, maxPercent: 50, forMs: 60_000 } }),
      );
      try {
        for (let i = 0; i < 4; i++) expect((await through(gw2, `/s/${i}`)).status).toBe(200);
        const snap = gw2.gateway.services.snapshot().find((s) => s.name === 'secure')!;
        const foreignTarget = snap.targets.find((t) => t.url === foreign.url)!;
        expect(foreignTarget.state).toBe('ejected');
        expect(snap.targets.find((t) => t.url === good.url)!.state).toBe('healthy');
      } finally {
        await gw2.close();
      }
    },
    SLOW,
  );

  it(
    'mutual TLS: a target that requires a client certificate refuses the gateway without certFile, and serves it with one',
    async () => {
      const strict = await TestUpstream.start({
        cert: pem(certs.certFile),
        key: pem(certs.keyFile),
        ca: pem(certs.caFile),
        requestCert: true,
        rejectUnauthorized: true,
      });
      strict.behaviour = (req, res) => res.end(JSON.stringify({ client: (req.socket as TLSSocket).getPeerCertificate().subject?.CN }));
      const { logger, lines } = capturingLogger();
      const without = await startTestGateway(secureConfig([strict.url], { caFile: certs.caFile }), { logger });
      try {
        const res = await through(without, '/s/m');
        expect(res.status).toBe(502);
        expect(strict.seen).toHaveLength(0);
        const line = lines.find((l) => typeof l.code === 'string' && String(l.msg).startsWith('TLS '));
        expect(line?.code).toMatch(/CERTIFICATE_REQUIRED|HANDSHAKE_FAILURE|ALERT/);
        expect(line?.target).toBe(strict.url);
        // Reported as what it is, a TLS failure with its code, not as a `reset`: in the failure line, and in the
        // target's recent errors (the admin API's and the dashboard's Services view).
        const failed = lines.find((l) => l.msg === 'upstream request failed');
        expect(failed).toMatchObject({ kind: 'tls', code: line?.code });
        const snap = without.gateway.services.snapshot().find((s) => s.name === 'secure')!;
        expect(snap.targets[0]!.recentErrors.map((e) => e.kind)).toEqual(['tls']);
      } finally {
        await without.close();
      }
      const withCert = await startTestGateway(
        secureConfig([strict.url], { caFile: certs.caFile, certFile: certs.clientCertFile, keyFile: certs.clientKeyFile }),
      );
      try {
        const res = await through(withCert, '/s/m');
        expect(res.status).toBe(200);
        expect(JSON.parse(res.body)).toEqual({ client: 'tollgate-test-client' });
      } finally {
        await withCert.close();
        await strict.close();
      }
    },
    SLOW,
  );

  it(
    'servername: a certificate for another name fails (ERR_TLS_CERT_ALTNAME_INVALID) until servername names it; SNI carries it',
    async () => {
      const named = certs.issue('orders-internal', { san: 'DNS:orders.internal', cn: 'orders.internal' });
      const up = await TestUpstream.start({ cert: pem(named.certFile), key: pem(named.keyFile) });
      up.behaviour = (req, res) => res.end(JSON.stringify({ sni: (req.socket as TLSSocket).servername }));
      const { logger, lines } = capturingLogger();
      const plain = await startTestGateway(secureConfig([up.url], { caFile: certs.caFile }), { logger });
      try {
        expect((await through(plain, '/s/n')).status).toBe(502);
        expect(lines.find((l) => l.code !== undefined)?.code).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
      } finally {
        await plain.close();
      }
      const gw = await startTestGateway(secureConfig([up.url], { caFile: certs.caFile, servername: 'orders.internal' }));
      try {
        const res = await through(gw, '/s/n');
        expect(res.status).toBe(200);
        expect(JSON.parse(res.body)).toEqual({ sni: 'orders.internal' });
      } finally {
        await gw.close();
        await up.close();
      }
    },
    SLOW,
  );

  it(
    'verify: false reaches a target whose certificate no configured CA signed',
    async () => {
      const gw = await startTestGateway(secureConfig([foreign.url], { caFile: certs.caFile, verify: false }));
      try {
        expect((await through(gw, '/s/v')).status).toBe(200);
      } finally {
        await gw.close();
      }
    },
    SLOW,
  );

  it(
    'health checks go over HTTPS with the service settings: a target failing verification is taken out, the other stays in',
    async () => {
      const { logger, lines } = capturingLogger();
      const checked = await TestUpstream.start({ cert: pem(certs.certFile), key: pem(certs.keyFile) });
      const gw = await startTestGateway(
        secureConfig(
          [foreign.url, checked.url],
          { caFile: certs.caFile },
          { healthCheck: { path: '/healthz', intervalMs: 100, unhealthyAfter: 1, healthyAfter: 1 } },
        ),
        { logger },
      );
      try {
        const deadline = Date.now() + 5000;
        let states: string[] = [];
        while (Date.now() < deadline) {
          const snap = gw.gateway.services.snapshot().find((s) => s.name === 'secure')!;
          states = snap.targets.map((t) => t.state);
          if (states[0] === 'health_check' && checked.seen.some((r) => r.url === '/healthz')) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        expect(states).toEqual(['health_check', 'healthy']);
        expect(checked.seen.find((r) => r.url === '/healthz')!.headers['user-agent']).toBe('tollgate-health-check');
        const out = lines.find((l) => l.msg === 'target failed its health checks: taken out');
        expect(out).toMatchObject({ target: foreign.url, reason: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
        for (let i = 0; i < 3; i++) expect((await through(gw, `/s/h${i}`)).status).toBe(200);
      } finally {
        await gw.close();
        await checked.close();
      }
    },
    SLOW,
  );

  it(
    'a reload with new TLS settings gives a kept target a new pool: the right CA applies to the next request',
    async () => {
      const wrong = secureConfig([good.url], { caFile: certs.otherCaFile });
      const gw = await startTestGateway(wrong);
      try {
        expect((await through(gw, '/s/r')).status).toBe(502);
        gw.runtime.apply(secureConfig([good.url], { caFile: certs.caFile }));
        expect((await through(gw, '/s/r')).status).toBe(200);
      } finally {
        await gw.close();
      }
    },
    SLOW,
  );
});

describe('TLS config errors', () => {
  async function check(name: string, config: Record<string, unknown>): Promise<{ code: number | null; stderr: string; stdout: string }> {
    const file = dir.write(name, config);
    return runCli(['config', 'check', '--config', file]);
  }
  const svc = (tls: Record<string, unknown>, url = 'https://127.0.0.1:9443') => ({ services: { orders: { targets: [url], tls } }, defaultService: 'orders' });

  it(
    "a missing file, a file that is not PEM, a key that is not the certificate's: exit 1, one line naming the field",
    async () => {
      const notPem = `${dir.dir}/not-pem.crt`;
      writeFileSync(notPem, 'hello\n');
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [svc({ caFile: `${dir.dir}/missing-ca.crt` }), /^ {2}services\.orders\.tls\.caFile: cannot read ".*missing-ca\.crt": file not found$/m],
        [svc({ caFile: notPem }), /^ {2}services\.orders\.tls\.caFile: ".*not-pem\.crt" holds no PEM certificate/m],
        [
          { server: { tls: { certFile: certs.certFile, keyFile: certs.clientKeyFile } } },
          /^ {2}server\.tls\.keyFile: ".*client\.key" is not the private key of the certificate in server\.tls\.certFile$/m,
        ],
        [{ admin: { tls: { certFile: certs.certFile, keyFile: notPem } } }, /^ {2}admin\.tls\.keyFile: ".*not-pem\.crt" holds no PEM private key/m],
        [{ ops: { port: 0, tls: { certFile: certs.keyFile, keyFile: certs.keyFile } } }, /^ {2}ops\.tls\.certFile: .* holds no PEM certificate/m],
        [{ server: { tls: { certFile: dir.dir, keyFile: certs.keyFile } } }, /^ {2}server\.tls\.certFile: cannot read .*: is a directory, not a file$/m],
      ];
      for (const [config, line] of cases) {
        const r = await check('bad-tls.yaml', config);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toMatch(line);
        expect(r.stderr).not.toMatch(/\n\s+at /);
        expect(r.stderr.trim().split('\n')).toHaveLength(2);
      }
    },
    SLOW,
  );

  it(
    'key without cert, an http:// target under tls, a bad minVersion: exit 1 naming the field',
    async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [svc({ caFile: certs.caFile, keyFile: certs.clientKeyFile }), 'services.orders.tls.certFile: certFile and keyFile go together'],
        [{ server: { tls: { keyFile: certs.keyFile } } }, 'server.tls.certFile: expected string, got nothing'],
        [svc({ caFile: certs.caFile }, 'http://127.0.0.1:9080'), 'services.orders.targets[0]: tls is set, so every target must be https://'],
        [
          { server: { tls: { certFile: certs.certFile, keyFile: certs.keyFile, minVersion: 'TLSv1.1' } } },
          'server.tls.minVersion: expected one of "TLSv1.2", "TLSv1.3"',
        ],
        [svc({ certFile: certs.clientCertFile, keyFile: certs.clientKeyFile }), 'services.orders.tls.caFile: expected string, got nothing'],
      ];
      for (const [config, text] of cases) {
        const r = await check('bad-tls2.yaml', config);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toContain(`  ${text}`);
      }
    },
    SLOW,
  );

  it(
    'verify: false is accepted with a warning; a good TLS config is OK; serve refuses a missing file with no stack trace',
    async () => {
      const warned = await check('verify-off.yaml', svc({ caFile: certs.caFile, verify: false }));
      expect(warned.code).toBe(0);
      expect(warned.stderr).toMatch(/^warning: services\.orders\.tls\.verify is false/m);
      const good = await check('good-tls.yaml', {
        server: { tls: { certFile: certs.certFile, keyFile: certs.keyFile, caFile: certs.caFile, minVersion: 'TLSv1.3' } },
        ...svc({ caFile: certs.caFile, certFile: certs.clientCertFile, keyFile: certs.clientKeyFile, servername: 'localhost' }),
      });
      expect(good.code, good.stderr).toBe(0);
      expect(good.stderr).toBe('');

      const file = dir.write('serve-missing.yaml', { server: { port: 0, tls: { certFile: `${dir.dir}/nope.crt`, keyFile: certs.keyFile } } });
      const r = await runCli(['serve', '--config', file]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/server\.tls\.certFile: cannot read ".*nope\.crt": file not found/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    },
    SLOW,
  );
});

describe("what a reload does with the listeners' tls blocks", () => {
  const tls = (extra: Record<string, unknown> = {}) => ({ certFile: '/etc/a.crt', keyFile: '/etc/a.key', ...extra });
  const cfg = (server: Record<string, unknown> | undefined, admin: Record<string, unknown> = {}) =>
    testConfig({ server: { port: 0, ...(server ? { tls: server } : {}) }, admin: { port: 0, ...admin } });

  it('new paths and minVersion apply; turning TLS or mutual TLS on or off is named under needsRestart and the old block stays', () => {
    const runtime = new Runtime(cfg(tls()));
    expect(runtime.apply(cfg(tls({ certFile: '/etc/b.crt', minVersion: 'TLSv1.3' })))).toEqual([]);
    expect(runtime.config.server.tls).toMatchObject({ certFile: '/etc/b.crt', minVersion: 'TLSv1.3' });

    expect(runtime.apply(cfg(undefined))).toEqual(['server.tls']);
    expect(runtime.config.server.tls?.certFile).toBe('/etc/b.crt');
    expect(runtime.apply(cfg(tls({ caFile: '/etc/ca.crt' })))).toEqual(['server.tls']);
    expect(runtime.config.server.tls?.caFile).toBeUndefined();

    // Another server field beside it is still the server section's restart, named as before.
    expect(runtime.apply(testConfig({ server: { port: 0, maxBodyBytes: 10, tls: tls() }, admin: { port: 0 } }))).toEqual(['server.*']);
    expect(runtime.config.server.tls?.certFile).toBe('/etc/a.crt');

    const plain = new Runtime(cfg(undefined));
    expect(plain.apply(cfg(tls()))).toEqual(['server.tls']);
    expect(plain.config.server.tls).toBeUndefined();
    expect(plain.apply(cfg(undefined, { tls: tls() }))).toEqual(['admin.tls']);
    expect(plain.config.admin.tls).toBeUndefined();
  });
});
