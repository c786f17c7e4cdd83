// AddressGuard, alone and inside OutboundClient: every hostile form of an address that reaches the machine itself, a
// private network or a metadata service is refused before any connection is made (a loopback server counts its
// connections: none), an allowed CIDR lets one through, and the client connects to the address the guard judged,
// not to a second lookup's answer, while keeping the URL's host for the Host header and TLS.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AddressGuard, isCidr, type Lookup } from '../src/outbound/address-guard.js';
import { OutboundClient, OutboundError } from '../src/outbound/client.js';
import { makeCertificates, type TestCertificates } from './helpers/tls.js';

/** A loopback server that counts the connections made to it and notes what each request said. */
class Counted {
  connections = 0;
  requests: Array<{ url: string; host: string | undefined; servername?: string | false | null; remote: string | undefined }> = [];
  readonly sockets = new Set<Socket>();
  port = 0;
  constructor(readonly server: Server) {}

  static async start(tls?: { cert: Buffer; key: Buffer }): Promise<Counted> {
    const server: Server = tls ? createHttpsServer(tls) : createServer();
    const c = new Counted(server);
    server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      c.connections++;
      c.sockets.add(socket);
      socket.on('close', () => c.sockets.delete(socket));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      c.requests.push({ url: req.url ?? '', host: req.headers.host, servername: (req.socket as TLSSocket).servername, remote: req.socket.remoteAddress });
      res.end('reached');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    c.port = (server.address() as AddressInfo).port;
    return c;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.server.close();
    await once(this.server, 'close');
  }
}

async function refusal(p: Promise<unknown>): Promise<OutboundError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(OutboundError);
    return err as OutboundError;
  }
  throw new Error('expected a refusal');
}

/** A lookup that answers from a table and counts its calls per name. */
function fakeLookup(table: Record<string, string[]>): Lookup & { calls: string[] } {
  const calls: string[] = [];
  const lookup = async (hostname: string) => {
    calls.push(hostname);
    const answers = table[hostname];
    if (!answers) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(lookup, { calls });
}

let server: Counted;
let client: OutboundClient;
beforeAll(async () => {
  server = await Counted.start();
  client = new OutboundClient();
});
afterAll(async () => {
  await client.close();
  await server.close();
});

describe('AddressGuard refuses, before connecting', () => {
  // [URL with PORT for the loopback server's port, the range named in the refusal's code]
  const hostile: Array<[string, string]> = [
    ['http://127.0.0.1:PORT/', 'loopback'],
    ['http://127.1:PORT/', 'loopback'],
    ['http://2130706433:PORT/', 'loopback'],
    ['http://0x7f.1:PORT/', 'loopback'],
    ['http://0x7f000001:PORT/', 'loopback'],
    ['http://017700000001:PORT/', 'loopback'],
    ['http://0177.0.0.1:PORT/', 'loopback'],
    ['http://[::1]:PORT/', 'loopback'],
    ['http://[::ffff:127.0.0.1]:PORT/', 'loopback'],
    ['http://[::ffff:7f00:1]:PORT/', 'loopback'],
    ['http://[0:0:0:0:0:ffff:127.0.0.1]:PORT/', 'loopback'],
    ['http://[::127.0.0.1]:PORT/', 'loopback'],
    ['http://[64:ff9b::127.0.0.1]:PORT/', 'loopback'],
    ['http://localhost:PORT/', 'loopback'],
    ['http://0.0.0.0:PORT/', 'unspecified'],
    ['http://0:PORT/', 'unspecified'],
    ['http://[::]:PORT/', 'unspecified'],
    ['http://10.0.0.1:PORT/', 'private'],
    ['http://172.16.5.4:PORT/', 'private'],
    ['http://192.168.0.1:PORT/', 'private'],
    ['http://[::ffff:192.168.0.1]:PORT/', 'private'],
    ['http://[fc00::1]:PORT/', 'private'],
    ['http://[fd12:3456::1]:PORT/', 'private'],
    ['http://169.254.1.1:PORT/', 'link_local'],
    ['http://[fe80::1]:PORT/', 'link_local'],
    ['http://169.254.169.254:PORT/', 'metadata'],
    ['http://[::ffff:169.254.169.254]:PORT/', 'metadata'],
    ['http://[fd00:ec2::254]:PORT/', 'metadata'],
    ['http://100.100.100.200:PORT/', 'metadata'],
    ['http://100.64.0.1:PORT/', 'carrier_grade_nat'],
    ['http://100.127.255.254:PORT/', 'carrier_grade_nat'],
    ['http://224.0.0.1:PORT/', 'multicast'],
    ['http://[ff02::1]:PORT/', 'multicast'],
    ['http://255.255.255.255:PORT/', 'broadcast'],
    ['http://240.0.0.1:PORT/', 'reserved'],
    ['http://192.0.2.1:PORT/', 'reserved'],
    ['http://[2001:db8::1]:PORT/', 'reserved'],
  ];

  it.each(hostile)('%s (%s)', async (template, range) => {
    const url = template.replace('PORT', String(server.port));
    const before = server.connections;
    const guard = new AddressGuard({ allow: [] });
    const direct = await refusal(guard.check(url));
    expect(direct).toMatchObject({ kind: 'address_refused', code: range });
    const through = await refusal(client.request({ url, timeoutMs: 2000, guard }));
    expect(through).toMatchObject({ kind: 'address_refused', code: range });
    expect(server.connections).toBe(before);
  });

  it('names the address and the range, and the setting that allows it', async () => {
    const guard = new AddressGuard({ allow: [] });
    expect((await refusal(guard.check('http://127.0.0.1/'))).message).toBe('127.0.0.1 is a loopback address; allow it with events.allowTargets');
    expect((await refusal(guard.check('http://[::ffff:7f00:1]/'))).message).toBe(
      '::ffff:7f00:1 (127.0.0.1) is a loopback address; allow it with events.allowTargets',
    );
    const named = new AddressGuard({ allow: [], lookup: fakeLookup({ 'hooks.example': ['10.1.2.3'] }), allowSetting: 'webhooks.allow' });
    expect((await refusal(named.check('https://hooks.example/x'))).message).toBe(
      'hooks.example resolves to 10.1.2.3, a private address; allow it with webhooks.allow',
    );
  });

  it('refuses other schemes, userinfo and garbage without throwing anything but an OutboundError', async () => {
    const guard = new AddressGuard({ allow: ['0.0.0.0/0', '::/0'] });
    const cases: Array<[string, string]> = [
      ['ftp://example.com/', 'ERR_URL_SCHEME'],
      ['file:///etc/passwd', 'ERR_URL_SCHEME'],
      ['gopher://127.0.0.1:6379/_FLUSHALL', 'ERR_URL_SCHEME'],
      ['javascript:alert(1)', 'ERR_URL_SCHEME'],
      ['http://user:pass@example.com/', 'ERR_URL_USERINFO'],
      ['http://user@example.com/', 'ERR_URL_USERINFO'],
      ['not a url', 'ERR_INVALID_URL'],
      ['', 'ERR_INVALID_URL'],
      ['http://[::1/', 'ERR_INVALID_URL'],
      ['http://%00/', 'ERR_INVALID_URL'],
    ];
    for (const [url, code] of cases) expect(await refusal(guard.check(url)), url).toMatchObject({ kind: 'address_refused', code });
  });

  it('a lookup answering nothing usable is refused, never a crash', async () => {
    const weird =
      (answers: unknown): Lookup =>
      () =>
        Promise.resolve(answers as never);
    expect(await refusal(new AddressGuard({ allow: [], lookup: weird([]) }).check('http://a.example/'))).toMatchObject({ kind: 'dns', code: 'ENOTFOUND' });
    expect(await refusal(new AddressGuard({ allow: [], lookup: weird(null) }).check('http://a.example/'))).toMatchObject({ kind: 'dns' });
    expect(await refusal(new AddressGuard({ allow: [], lookup: weird([{ address: 'nonsense', family: 4 }]) }).check('http://a.example/'))).toMatchObject({
      kind: 'address_refused',
    });
    expect(await refusal(new AddressGuard({ allow: [], lookup: weird([null]) }).check('http://a.example/'))).toMatchObject({ kind: 'address_refused' });
    const failing: Lookup = () => Promise.reject(Object.assign(new Error('queryA ESERVFAIL'), { code: 'ESERVFAIL' }));
    expect(await refusal(new AddressGuard({ allow: [], lookup: failing }).check('http://a.example/'))).toMatchObject({ kind: 'dns', code: 'ESERVFAIL' });
  });

  it('a name answering a public address and a loopback one is refused as a whole, with no connection', async () => {
    const lookup = fakeLookup({ 'mixed.example': ['93.184.215.14', '127.0.0.1'] });
    const before = server.connections;
    const err = await refusal(client.request({ url: `http://mixed.example:${server.port}/`, timeoutMs: 2000, guard: new AddressGuard({ allow: [], lookup }) }));
    expect(err).toMatchObject({ kind: 'address_refused', code: 'loopback', message: expect.stringContaining('mixed.example resolves to 127.0.0.1') as string });
    expect(server.connections).toBe(before);
  });

  it('takes CIDRs and single addresses in allow; anything else is refused at construction', () => {
    expect(isCidr('127.0.0.0/8')).toBe(true);
    expect(isCidr('::1')).toBe(true);
    expect(isCidr('fd00::/8')).toBe(true);
    expect(isCidr('10.0.0.0/33')).toBe(false);
    expect(isCidr('example.com')).toBe(false);
    expect(() => new AddressGuard({ allow: ['not-a-cidr'] })).toThrow(/not a CIDR/);
  });
});

describe('AddressGuard allows, and the client connects to the address it judged', () => {
  it('a metadata address is allowed only by an entry naming it alone, not by the range around it', async () => {
    const wide = new AddressGuard({ allow: ['169.254.0.0/16', 'fd00::/8'] });
    expect(await wide.check('http://169.254.1.1/')).toEqual({ address: '169.254.1.1', family: 4 });
    await expect(refusal(wide.check('http://169.254.169.254/'))).resolves.toMatchObject({
      kind: 'address_refused',
      code: 'metadata',
      message: '169.254.169.254 is a cloud metadata address; allow it with events.allowTargets, naming it alone (169.254.169.254/32)',
    });
    await expect(refusal(wide.check('http://[::ffff:169.254.169.254]/'))).resolves.toMatchObject({ code: 'metadata' });
    await expect(refusal(wide.check('http://[fd00:ec2::254]/'))).resolves.toMatchObject({ code: 'metadata' });
    const exact = new AddressGuard({ allow: ['169.254.169.254/32'] });
    expect(await exact.check('http://169.254.169.254/')).toEqual({ address: '169.254.169.254', family: 4 });
  });

  it('an allowed CIDR lets the address through, its IPv4-mapped form too; a neighbour outside it is still refused', async () => {
    const guard = new AddressGuard({ allow: ['127.0.0.1/32'] });
    expect(await guard.check('http://127.0.0.1/')).toEqual({ address: '127.0.0.1', family: 4 });
    expect(await guard.check('http://[::ffff:127.0.0.1]/')).toEqual({ address: '::ffff:7f00:1', family: 6 });
    expect(await refusal(guard.check('http://127.0.0.2/'))).toMatchObject({ code: 'loopback' });
    const before = server.requests.length;
    const res = await client.request({ url: `http://127.0.0.1:${server.port}/allowed`, timeoutMs: 2000, guard });
    expect(res.body.toString()).toBe('reached');
    expect(server.requests.slice(before).map((r) => r.url)).toEqual(['/allowed']);
  });

  it('one lookup per request: the socket goes to the address judged, the Host header keeps the name', async () => {
    // A rebinding DNS server: an allowed address the first time, the metadata service after. The name itself does
    // not resolve on this machine (.invalid), so reaching the server proves no lookup of the client's own ran.
    let answered = 0;
    const calls: string[] = [];
    const rebinding: Lookup = (hostname) => {
      calls.push(hostname);
      return Promise.resolve([{ address: answered++ === 0 ? '127.0.0.1' : '169.254.169.254', family: 4 }]);
    };
    const guard = new AddressGuard({ allow: ['127.0.0.1/32'], lookup: rebinding });
    const before = server.requests.length;
    const res = await client.request({ url: `http://hooks.invalid:${server.port}/pinned`, timeoutMs: 2000, guard });
    expect(res.status).toBe(200);
    expect(calls).toEqual(['hooks.invalid']);
    const seen = server.requests.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ url: '/pinned', host: `hooks.invalid:${server.port}`, remote: '127.0.0.1' });
    // The next request looks the name up again, and this time the answer is refused: nothing is sent.
    const err = await refusal(client.request({ url: `http://hooks.invalid:${server.port}/again`, timeoutMs: 2000, guard }));
    expect(err).toMatchObject({ kind: 'address_refused', code: 'metadata' });
    expect(server.requests.slice(before)).toHaveLength(1);
  });

  it('a lookup that never answers ends as a timeout within timeoutMs', async () => {
    const guard = new AddressGuard({ allow: [], lookup: () => new Promise(() => undefined) });
    const startedAt = Date.now();
    const err = await refusal(client.request({ url: 'http://slow-dns.example/', timeoutMs: 200, guard }));
    expect(err.kind).toBe('timeout');
    expect(Date.now() - startedAt).toBeLessThan(1200);
  });

  describe('over TLS', () => {
    let certs: TestCertificates;
    let secure: Counted;
    beforeAll(async () => {
      certs = makeCertificates();
      secure = await Counted.start({ cert: readFileSync(certs.certFile), key: readFileSync(certs.keyFile) });
    });
    afterAll(async () => {
      await secure?.close();
      certs?.remove();
    });

    it('the pinned connection keeps the name for SNI and verification', async () => {
      // The certificate names localhost and 127.0.0.1; the lookup says localhost is 127.0.0.1.
      const lookup = fakeLookup({ localhost: ['127.0.0.1'] });
      const guard = new AddressGuard({ allow: ['127.0.0.0/8'], lookup });
      const tls = { ca: readFileSync(certs.caFile) };
      const res = await client.request({ url: `https://localhost:${secure.port}/tls`, timeoutMs: 3000, guard, tls });
      expect(res.body.toString()).toBe('reached');
      expect(secure.requests.at(-1)).toMatchObject({ url: '/tls', host: `localhost:${secure.port}`, servername: 'localhost', remote: '127.0.0.1' });
      expect(lookup.calls).toEqual(['localhost']);
      // A name the certificate does not hold fails verification although it was pinned to the same address.
      const other = new AddressGuard({ allow: ['127.0.0.0/8'], lookup: fakeLookup({ 'hooks.example': ['127.0.0.1'] }) });
      const err = await refusal(client.request({ url: `https://hooks.example:${secure.port}/tls`, timeoutMs: 3000, guard: other, tls }));
      expect(err).toMatchObject({ kind: 'tls', code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
    });
  });
});
