// Docs that restate the code, checked against it: the request path's stage picture (README.md, docs/request-path.md)
// and docs/request-path.md's table of stages against the table requestPath is assembled from, the usage ledger's Redis key name,
// docs/architecture.md's source layout against src/ and its "Dependencies" against package.json.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../src/http/errors.js';
import { STAGES } from '../src/pipeline/request-path.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { keySubject } from '../src/limits/subject.js';

const read = (path: string): string => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');

/** "0. normalizeRequestTarget", "R. ownEndpoints", "Q. answerQuota": the marks and stages a picture names, in order. */
function stagesPictured(picture: string): string[] {
  return [...picture.matchAll(/(?:^|\s)(\d{1,2}|[A-Z])\.\s+([a-z]\w+)/gm)].map((m) => `${m[1]}. ${m[2]}`);
}

/** The picture between "client ──► 0." and the end of its code block. */
function pictureIn(markdown: string): string {
  const start = markdown.indexOf('client ──► 0.');
  return markdown.slice(start, markdown.indexOf('```', start));
}

/** The rows of the markdown table under the header line `header`, as written. */
function tableRows(markdown: string, header: string): string[] {
  const start = markdown.indexOf(`${header}\n`);
  if (start < 0) return [];
  const rows: string[] = [];
  for (const line of markdown.slice(start).split('\n').slice(2)) {
    if (!line.startsWith('|')) break;
    rows.push(line);
  }
  return rows;
}

describe('the request path picture', () => {
  // The picture draws the request path in the order it runs, and the quota endpoint's own stage under R
  // (ownEndpoints, which runs the quota sequence); stage 0 runs in the app, before the request path.
  const drawn = STAGES.filter((s) => s.in.includes('app') || s.in.includes('path'));
  const quotaOnly = STAGES.filter((s) => s.in.every((where) => where === 'quota'));
  const at = drawn.findIndex((s) => s.name === 'ownEndpoints') + 1;
  const expected = [...drawn.slice(0, at), ...quotaOnly, ...drawn.slice(at)].map((s) => `${s.mark}. ${s.name}`);

  it('the table: marks and names unique, the quota endpoint ending in answerQuota, stage 0 run by the app', () => {
    expect(new Set(STAGES.map((s) => s.mark)).size).toBe(STAGES.length);
    expect(new Set(STAGES.map((s) => s.name)).size).toBe(STAGES.length);
    expect(STAGES.filter((s) => s.in.includes('quota')).map((s) => s.name)).toEqual(['authenticate', 'anonymousLimit', 'requireApiKey', 'answerQuota']);
    expect(read('src/server/app.ts')).toMatch(/normalizeRequestTarget\(req\)/);
    expect(STAGES.filter((s) => s.in.includes('app')).map((s) => s.name)).toEqual(['normalizeRequestTarget']);
    expect(STAGES.filter((s) => s.in.includes('path')).map((s) => s.name)).toEqual([
      'observeRequest',
      'securityHeaders',
      'ownEndpoints',
      'matchRoute',
      'refuseAmbiguousPaths',
      'refuseTransferCodings',
      'requireHealthyService',
      'authenticate',
      'anonymousLimit',
      'publicRouteLimits',
      'requireApiKey',
      'consumerStatus',
      'allowedAddress',
      'scopes',
      'requireAllowedPlan',
      'keyLimits',
      'routePolicy',
      'validateRequest',
      'declaredBodyLimit',
      'prepareUpstreamHeaders',
      'proxyToUpstream',
    ]);
  });

  it.each([
    ['README.md', pictureIn(read('README.md'))],
    ['docs/request-path.md', pictureIn(read('docs/request-path.md'))],
  ])('%s draws exactly the stages of src/pipeline/request-path.ts, with their marks, in order', (_where, picture) => {
    expect(stagesPictured(picture)).toEqual(expected);
  });

  it("README.md's picture is docs/request-path.md's, character for character", () => {
    expect(pictureIn(read('README.md'))).toBe(pictureIn(read('docs/request-path.md')));
  });

  it("docs/request-path.md's table of stages is the code's, row for row", () => {
    const rows = STAGES.map((s) => `| ${s.mark} | ${s.phase} | \`${s.name}\` | ${s.runsFor} | ${s.what} |`);
    expect(tableRows(read('docs/request-path.md'), '| mark | phase | stage | runs for | what |')).toEqual(rows);
  });
});

describe('the usage ledger key', () => {
  // The keys Keyspace builds, with the docs' placeholders for the ids and the day.
  const ks = new Keyspace('');
  const ledgerKey = ks.usageDay(keySubject('<id>'), '<day>' as unknown as number);
  const consumerLedgerKey = ks.consumerUsageDay('<consumer id>', '<id>', '<day>' as unknown as number);

  it.each(['docs/admin-api.md', 'docs/architecture.md', 'docs/keys-and-limits.md'])('%s names it as src/storage/keyspace.ts builds it', (doc) => {
    const text = read(doc)
      .replace(/<key id>/g, '<id>')
      .replace(/<UTC day>/g, '<day>');
    expect(text).toContain(`\`${ledgerKey}\``);
    // A key's day under a consumer, and no other name starting usage:{ but the consumer's hash tag.
    expect(text).toContain(`\`${consumerLedgerKey}\``);
    expect(text).not.toMatch(/`usage:\{(?!c:<consumer id>\})/);
  });

  it("a key of a consumer's ledger day is the one the limit script names by its subject", () => {
    const bySubject = new Keyspace('').usageDay(keySubject('<id>', '<consumer id>'), '<day>');
    expect(bySubject).toBe(consumerLedgerKey);
  });
});

describe('docs/architecture.md', () => {
  const architecture = read('docs/architecture.md');
  const layout = architecture.slice(architecture.indexOf('### Source layout'), architecture.indexOf('\nThe request path'));
  const root = fileURLToPath(new URL('..', import.meta.url));
  const srcFiles = (readdirSync(join(root, 'src'), { recursive: true }) as string[]).filter((f) => statSync(join(root, 'src', f)).isFile()).sort();

  it('the source layout names every file in src/', () => {
    // By its file name; the dashboard's views and the declaration files by their stem, in a line naming their folder
    // up to the next ";" ("views/: one module per page: overview, keys, ...", "vendor/*.d.ts", "types/ ... (cluster-key-slot,
    // bloomfilter)").
    const named = (f: string): boolean => {
      const base = basename(f);
      if (layout.includes(base)) return true;
      if (!/\.(d\.ts|js)$/.test(base)) return false;
      const stem = base.replace(/\.(d\.ts|js)$/, '');
      const folder = `${basename(dirname(f))}/`;
      const at = layout.indexOf(folder);
      if (at < 0) return false;
      const end = layout.indexOf(';', at);
      const after = layout.slice(at, end < 0 ? undefined : end);
      return after.startsWith(`${folder}*.${base.endsWith('.d.ts') ? 'd.ts' : 'js'}`) || new RegExp(`\\b${stem}\\b`).test(after);
    };
    expect(srcFiles.length).toBeGreaterThan(100);
    expect(srcFiles.filter((f) => !named(f))).toEqual([]);
  });

  it('the source layout names no file that is not there', () => {
    const names = [...layout.matchAll(/(?<![\w.*-])([\w/-][\w./-]*\.(?:ts|js|lua|css|html|json))(?![\w.])/g)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(100);
    const bases = new Set(srcFiles.map((f) => basename(f)));
    expect(names.filter((n) => !bases.has(basename(n)) && !existsSync(join(root, n)))).toEqual([]);
  });

  it('"Dependencies" says why for every package in package.json, at the major version installed, dev ones marked (dev)', () => {
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    const section = architecture.slice(architecture.indexOf('## Dependencies'));
    // First cells: "preact 10, htm 3", "@opentelemetry/api, sdk-trace-base, ...", "typescript 5.9, vitest 4.1 (dev)".
    const listed = new Map<string, { version?: string; dev: boolean }>();
    for (const line of section.split('\n')) {
      const cell = /^\| ([^|]+) \|/.exec(line)?.[1];
      if (!cell || cell.startsWith('package') || cell.startsWith('---')) continue;
      const dev = /\(dev\b/.test(cell);
      let scope = '';
      for (const part of cell.replace(/\([^)]*\)/g, '').split(',')) {
        const m = /^\s*(@[\w.-]+\/)?([\w.:-]+)(?:\s+(\d[\d.]*))?\s*$/.exec(part);
        if (!m) continue;
        if (m[1]) scope = m[1];
        // "@opentelemetry/api, sdk-trace-base": a bare name after a scoped one is in that scope when the scope has it.
        const scoped = !m[1] && scope && Object.hasOwn({ ...pkg.dependencies, ...pkg.devDependencies }, `${scope}${m[2]}`);
        const name = `${m[1] ?? (scoped ? scope : '')}${m[2]}`.toLowerCase();
        listed.set(name, { version: m[3], dev });
      }
    }
    const problems: string[] = [];
    for (const [deps, dev] of [
      [pkg.dependencies, false],
      [pkg.devDependencies, true],
    ] as const) {
      for (const [name, range] of Object.entries(deps)) {
        const row = listed.get(name.toLowerCase());
        if (!row) problems.push(`${name}: no row`);
        else if (row.dev !== dev) problems.push(`${name}: ${dev ? 'a dev dependency, not marked (dev)' : 'a dependency, marked (dev)'}`);
        else if (row.version !== undefined && !`${range.replace(/^[\^~]/, '')}.`.startsWith(`${row.version}.`))
          problems.push(`${name}: ${row.version} in the docs, ${range} in package.json`);
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('error codes in the docs and the code', () => {
  const docs = [
    'README.md',
    ...readdirSync(new URL('../docs', import.meta.url))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];

  it('every "<status> <code>" the docs write is the catalogue\'s status for that code (docs/errors.md lists them all)', () => {
    const wrong: string[] = [];
    let seen = 0;
    for (const doc of docs) {
      for (const m of read(doc).matchAll(/\b(\d{3})`? `?([a-z]+(?:_[a-z]+)+)\b/g)) {
        const entry = (ERRORS as Record<string, { status: number } | undefined>)[m[2]!];
        if (!entry) continue;
        seen++;
        if (entry.status !== Number(m[1])) wrong.push(`${doc}: "${m[0]}" (${m[2]} is ${entry.status})`);
      }
    }
    expect(seen).toBeGreaterThan(50);
    expect(wrong).toEqual([]);
  });

  it('an error body written by hand in src/ (not through sendError, typed by the catalogue) uses a catalogue code', () => {
    const root = fileURLToPath(new URL('../src', import.meta.url));
    const bodies: string[] = [];
    for (const f of readdirSync(root, { recursive: true }) as string[]) {
      if (!f.endsWith('.ts')) continue;
      // { code: '...', message: ..., status: N, ... }: an answer's body (zod's issues carry no status).
      for (const m of readFileSync(join(root, f), 'utf8').matchAll(/\bcode: '([a-z_]+)',\s*message:(?:(?!\bcode:)[\s\S]){0,300}?\bstatus: (\d{3})/g)) {
        bodies.push(`${f}: ${m[2]} ${m[1]}`);
      }
    }
    expect(bodies.length).toBeGreaterThanOrEqual(2);
    const catalogue = ERRORS as Record<string, { status: number } | undefined>;
    expect(
      bodies.filter((b) => {
        const [status, code] = b.slice(b.indexOf(': ') + 2).split(' ');
        return catalogue[code!]?.status !== Number(status);
      }),
    ).toEqual([]);
  });
});
