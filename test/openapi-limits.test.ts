// Hostile and large OpenAPI documents, generated here as an adversary would write them: a YAML alias bomb, a $ref
// fan-out (each schema naming the next twice), a 4,000-branch anyOf and 20,000 operations. Each is either loaded within
// bounded time and memory or refused with an error naming the file and the limit, by `config check` (exit 1) and by
// a serving gateway's reload (the old config stays), while that gateway answers /healthz and proxied requests without
// delay during the reload and still exits on SIGTERM. The documents are read on a thread of their own
// (src/openapi/load-thread.ts); the in-process tests measure the event loop's longest stall while one is read.
// Needs dist/ (npm test builds first: the reading thread and the CLI run from it); loopback only.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../src/config/load.js';
import { CliProcess, assertBuilt, runCli, startServe, tempDir } from './helpers/cli.js';
import { TestUpstream, echo } from './helpers/upstream.js';

const INFO = { title: 'red team', version: '1' };

/** Ten levels of nine aliases each: a few hundred bytes of YAML that a reader without an alias bound expands to 9^10 strings. */
function aliasBomb(): string {
  const lines = ['openapi: 3.1.0', 'info: { title: t, version: "1" }', `x-a0: &a0 [${Array(9).fill('"lol"').join(', ')}]`];
  for (let i = 1; i <= 9; i++)
    lines.push(
      `x-a${i}: &a${i} [${Array(9)
        .fill(`*a${i - 1}`)
        .join(', ')}]`,
    );
  return `${lines.join('\n')}\npaths: {}\n`;
}

/** `levels` schemas each naming the next twice: a few KB that is 2^levels schemas with its $refs followed. */
function refFanout(levels = 48): string {
  const schemas: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++)
    schemas[`S${i}`] = { type: 'object', properties: { a: { $ref: `#/components/schemas/S${i + 1}` }, b: { $ref: `#/components/schemas/S${i + 1}` } } };
  schemas[`S${levels}`] = { type: 'string' };
  return JSON.stringify({
    openapi: '3.1.0',
    info: INFO,
    paths: {
      '/x': {
        post: {
          operationId: 'x',
          requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/S0' } } } },
          responses: { 200: { description: 'ok' } },
        },
      },
    },
    components: { schemas },
  });
}

/**
 * One body schema of `n` branches. 4,000 take 2 s to compile on Node.js 24 and 3 s on Node.js 20 on an idle core, twice
 * the 1 s limit at least (2,000 took 0.9-1.0 s, on either side of it).
 */
function anyOfBranches(n = 4000): string {
  const anyOf = Array.from({ length: n }, (_, i) => ({ type: 'object', required: [`f${i}`], properties: { [`f${i}`]: { type: 'integer', minimum: i } } }));
  return JSON.stringify({
    openapi: '3.1.0',
    info: INFO,
    security: [],
    paths: {
      '/x': { post: { operationId: 'x', requestBody: { content: { 'application/json': { schema: { anyOf } } } }, responses: { 200: { description: 'ok' } } } },
    },
  });
}

/** `n` operations, each with a path parameter: about 3.5 MB of JSON for 20,000. */
function manyOperations(n = 20_000): string {
  const paths: Record<string, unknown> = {};
  for (let i = 0; i < n; i++)
    paths[`/r${i}/{id}`] = {
      get: {
        operationId: `op${i}`,
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'integer' } }],
        responses: { 200: { description: 'ok' } },
      },
    };
  return JSON.stringify({ openapi: '3.1.0', info: INFO, security: [], paths });
}

/** A small valid document: what the serving gateway starts with. */
function smallDocument(): string {
  return JSON.stringify({
    openapi: '3.1.0',
    info: INFO,
    security: [],
    paths: {
      '/things/{id}': {
        get: {
          operationId: 'getThing',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: { description: 'ok' } },
        },
      },
    },
  });
}

function gatewayYaml(doc: string, upstream = 'http://127.0.0.1:9', validate = 'enforce'): string {
  return [
    'server: { host: 127.0.0.1, port: 0 }',
    'log: { level: info }',
    'anonymous: { perMinute: 100000 }',
    'services:',
    '  s:',
    `    targets: [${upstream}]`,
    `    openapi: { file: ${doc}, basePath: /v1, validate: ${validate} }`,
    '',
  ].join('\n');
}

/** The event loop's longest stall while `work` runs: a 10 ms timer's largest lateness. */
async function longestStall<T>(work: () => Promise<T>): Promise<{ value: T; stallMs: number; ms: number }> {
  let last = performance.now();
  let stallMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last - 10);
    last = now;
  }, 10);
  const started = performance.now();
  try {
    const value = await work();
    return { value, stallMs, ms: performance.now() - started };
  } finally {
    clearInterval(timer);
  }
}

const dir = tempDir();
beforeAll(() => assertBuilt());
afterAll(async () => {
  await CliProcess.killAll();
  dir.remove();
});

describe('config check on hostile documents: refused, naming the file and the limit', () => {
  it.each([
    ['an alias bomb', 'bomb.yaml', aliasBomb, /bomb\.yaml.*aliases expand past the limit of 100/],
    ['a $ref fan-out', 'fanout.json', () => refFanout(), /fanout\.json.*\$refs followed it is over the limit of [\d,]+ values/],
  ])(
    '%s: exit 1 within seconds',
    async (_name, file, make, expected) => {
      expect(make().length).toBeLessThan(10_000);
      dir.write(file, make());
      const config = dir.write(`${file}.gateway.yaml`, gatewayYaml(file));
      const r = await runCli(['config', 'check', '--config', config], { timeoutMs: 60_000 });
      expect(r.signal, `killed after 60 s: ${r.stderr}`).toBeNull();
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(expected);
      expect(r.stderr).toContain('invalid configuration (1 problem)');
    },
    90_000,
  );
});

describe('config check on a document over the size limit', () => {
  it('a 17 MiB file: exit 1 naming the file, its size and the limit, without parsing it', async () => {
    dir.write('huge.json', JSON.stringify({ openapi: '3.1.0', info: INFO, paths: {}, 'x-padding': 'x'.repeat(17 * 1024 * 1024) }));
    const config = dir.write('huge.gateway.yaml', gatewayYaml('huge.json'));
    const r = await runCli(['config', 'check', '--config', config], { timeoutMs: 60_000 });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('services.s.openapi: huge.json: huge.json is 17.0 MiB, over the limit of 16.0 MiB for one file of an OpenAPI document');
  }, 90_000);
});

describe('reading documents leaves the event loop free', () => {
  it('a 4,000-branch anyOf loads with the event loop free when its requests are not validated', async () => {
    dir.write('anyof.json', anyOfBranches());
    const config = dir.write('anyof-off.gateway.yaml', gatewayYaml('anyof.json', 'http://127.0.0.1:9', 'off'));
    const { value, stallMs } = await longestStall(() => loadConfigFile(config, {}));
    expect(value.ok, JSON.stringify(value)).toBe(true);
    // Reading on the event loop stalled it for seconds; on a thread of its own, hardly at all.
    expect(stallMs).toBeLessThan(500);
  }, 120_000);

  it('a 4,000-branch anyOf validated: refused, since compiling it would hold the event loop for seconds on its first request', async () => {
    const config = dir.write('anyof.gateway.yaml', gatewayYaml('anyof.json'));
    const { value, stallMs } = await longestStall(() => loadConfigFile(config, {}));
    expect(value.ok).toBe(false);
    if (value.ok) return;
    expect(value.errors).toHaveLength(1);
    expect(value.errors[0]).toMatch(
      /^anyof\.json#\/paths\/~1x\/post: compiling its request schemas took \d+\.\d s, over the limit of 1 s for one operation .*set validate: off$/,
    );
    expect(stallMs).toBeLessThan(500);
  }, 120_000);

  it('20,000 operations past the deadline: refused naming the file and the limit, in about that time', async () => {
    dir.write('many.json', manyOperations());
    const config = dir.write('many.gateway.yaml', gatewayYaml('many.json'));
    const { value, stallMs, ms } = await longestStall(() => loadConfigFile(config, {}, undefined, { deadlineMs: 1500 }));
    expect(value.ok).toBe(false);
    if (value.ok) return;
    expect(value.errors).toEqual(['services.s.openapi: many.json: not read within the limit of 1.5 s for reading OpenAPI documents (too large?)']);
    expect(ms).toBeLessThan(15_000);
    expect(stallMs).toBeLessThan(500);
  }, 60_000);

  it('20,000 operations past the heap limit: refused naming the file and the limit', async () => {
    const config = dir.write('many-heap.gateway.yaml', gatewayYaml('many.json'));
    const { value, stallMs } = await longestStall(() => loadConfigFile(config, {}, undefined, { heapMb: 48 }));
    expect(value.ok).toBe(false);
    if (value.ok) return;
    expect(value.errors).toEqual(['services.s.openapi: many.json: needs more than the limit of 48 MB of memory for reading OpenAPI documents (too large?)']);
    expect(stallMs).toBeLessThan(500);
  }, 120_000);
});

describe('a serving gateway reloading a hostile document', () => {
  let up: TestUpstream;
  beforeAll(async () => {
    up = await TestUpstream.start();
    up.behaviour = echo;
  });
  afterAll(async () => {
    await up?.close();
  });

  /** Probes /healthz and a proxied request every 20 ms until `until` settles: the slowest answer of each, and any failure. */
  async function probeDuring(url: string, until: Promise<unknown>): Promise<{ healthz: number; proxied: number; failures: string[]; probes: number }> {
    let done = false;
    void until.finally(() => (done = true));
    const worst = { healthz: 0, proxied: 0 };
    const failures: string[] = [];
    let probes = 0;
    const once = async (what: 'healthz' | 'proxied', path: string): Promise<void> => {
      const started = performance.now();
      try {
        const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(30_000) });
        await res.arrayBuffer();
        if (res.status !== 200) failures.push(`${path}: ${res.status}`);
      } catch (err) {
        failures.push(`${path}: ${String(err)}`);
      }
      worst[what] = Math.max(worst[what], performance.now() - started);
    };
    const deadline = Date.now() + 120_000;
    while (!done && Date.now() < deadline) {
      await Promise.all([once('healthz', '/healthz'), once('proxied', '/v1/things/1')]);
      probes++;
      await new Promise((r) => setTimeout(r, 20));
    }
    return { ...worst, failures, probes };
  }

  it.each([
    ['an alias bomb', 'bomb.yaml', aliasBomb, /aliases expand past the limit/],
    ['a $ref fan-out', 'fanout.json', () => refFanout(), /over the limit of [\d,]+ values/],
  ])(
    '%s: refused and logged, the old config stays, probes answered quickly throughout',
    async (_name, file, make, expected) => {
      const name = `serving-${file}`;
      const docPath = join(dir.dir, name);
      writeFileSync(docPath, smallDocument());
      const config = dir.write(`${name}.gateway.yaml`, gatewayYaml(name, up.url, 'off'));
      const { proc, url } = await startServe(config, 60_000);
      try {
        const before = await probeDuring(url, new Promise((r) => setTimeout(r, 300)));
        expect(before.failures).toEqual([]);
        writeFileSync(docPath, make());
        const mark = proc.logs.length;
        proc.signal('SIGHUP');
        const rejected = proc.waitForLog('config reload rejected', { after: mark, timeoutMs: 90_000 });
        const during = await probeDuring(url, rejected);
        const line = await rejected;
        expect(JSON.stringify(line.errors)).toMatch(expected);
        expect(JSON.stringify(line.errors)).toContain(name);
        expect(during.failures).toEqual([]);
        // Answered as quickly as before the reload, give or take a loaded machine's scheduling.
        expect(during.healthz).toBeLessThan(Math.max(1000, 10 * before.healthz));
        expect(during.proxied).toBeLessThan(Math.max(1000, 10 * before.proxied));
        // The old config stays: its route still answers.
        const res = await fetch(`${url}/v1/things/2`);
        expect(res.status).toBe(200);
      } finally {
        proc.signal('SIGTERM');
        const exit = await proc.waitForExit(20_000);
        expect(exit.code).toBe(0);
      }
    },
    180_000,
  );

  it('20,000 operations: probes answered quickly while the document is read, and SIGTERM ends the process meanwhile', async () => {
    const name = 'serving-many.json';
    const docPath = join(dir.dir, name);
    writeFileSync(docPath, smallDocument());
    const config = dir.write(`${name}.gateway.yaml`, gatewayYaml(name, up.url, 'off'));
    const { proc, url } = await startServe(config, 60_000);
    try {
      const before = await probeDuring(url, new Promise((r) => setTimeout(r, 300)));
      // The probes' route is in the new document too: a read that ends within the probes' 3 s (a fast machine) then
      // leaves it answering as before, rather than a 404 from the new routes.
      const many = JSON.parse(manyOperations()) as { paths: Record<string, unknown> };
      many.paths['/things/{id}'] = (JSON.parse(smallDocument()) as { paths: Record<string, unknown> }).paths['/things/{id}'];
      writeFileSync(docPath, JSON.stringify(many));
      proc.signal('SIGHUP');
      // Reading 20,000 operations takes many seconds, all of them on the reading thread.
      const during = await probeDuring(url, new Promise((r) => setTimeout(r, 3000)));
      expect(during.failures).toEqual([]);
      expect(during.probes).toBeGreaterThan(10);
      expect(during.healthz).toBeLessThan(Math.max(1000, 10 * before.healthz));
      expect(during.proxied).toBeLessThan(Math.max(1000, 10 * before.proxied));
      const stopping = Date.now();
      proc.signal('SIGTERM');
      const exit = await proc.waitForExit(20_000);
      expect(exit.code).toBe(0);
      expect(Date.now() - stopping).toBeLessThan(15_000);
    } finally {
      await proc.stop();
    }
  }, 180_000);
});
