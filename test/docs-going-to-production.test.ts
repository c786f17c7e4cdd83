// docs/going-to-production.md against what it describes, so the page cannot drift from the code: every config block
// passes `tollgate config check` (the built CLI, with certificates made by openssl where the block names files), with
// its commented optional lines too; the kustomize block pins an image as written; every field, metric, alert, file,
// overlay, Secret, mount path and command it names exists; the CLI lines it quotes are the ones the CLI prints.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { touchesLine } from '../src/commands/touches.js';
import { assertBuilt, REPO, runCli } from './helpers/cli.js';
import { makeCertificates, type IssuedCertificate, type TestCertificates } from './helpers/tls.js';

const read = (path: string): string => readFileSync(join(REPO, path), 'utf8');
const PAGE = read('docs/going-to-production.md');
const SCHEMA = JSON.parse(read('config/gateway.schema.json')) as JsonSchema;
const SECTIONS = Object.keys(SCHEMA.properties ?? {});

interface JsonSchema {
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  enum?: unknown[];
}

/** The page's fenced blocks, each with its language ('' for none) and the line it starts on. */
const FENCED: Array<{ lang: string; line: number; text: string }> = [];
{
  let open: { lang: string; line: number; text: string } | undefined;
  PAGE.split('\n').forEach((l, i) => {
    const fence = /^```(\w*)$/.exec(l);
    if (fence && !open) open = { lang: fence[1]!, line: i + 1, text: '' };
    else if (fence && open) {
      FENCED.push(open);
      open = undefined;
    } else if (open) open.text += `${l}\n`;
  });
}
const blocks = (lang: string) => FENCED.filter((b) => b.lang === lang);

/** Inline code spans outside fenced blocks. */
const spans = [...PAGE.replace(/^```[\s\S]*?^```/gm, '').matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\s+/g, ' '));

/** The schema node at a dotted field path (`services.<name>.tls`, `ban.durationsSeconds[0]`), or undefined. */
function fieldAt(path: string): JsonSchema | undefined {
  let node: JsonSchema | undefined = SCHEMA;
  for (const part of path.replace(/\[\d*\]/g, '').split('.')) {
    const alts: JsonSchema[] = [node!, ...(node!.anyOf ?? [])];
    node = part.startsWith('<')
      ? alts.map((a) => a.additionalProperties).find((a): a is JsonSchema => typeof a === 'object')
      : alts.map((a) => a.properties?.[part] ?? a.items?.properties?.[part]).find((a) => a !== undefined);
    if (!node) return undefined;
  }
  return node;
}

/** "# caFile: x    # why" → "caFile: x": a block's optional lines, switched on. */
const uncommented = (yaml: string): string => yaml.replace(/^(\s*)# ([A-Za-z]\w*: \S[^#]*?)\s*(#.*)?$/gm, '$1$2');

describe('docs/going-to-production.md', () => {
  let certs: TestCertificates;
  let work: string;
  /** One certificate per directory name, issued once (openssl's key generation is the slow part). */
  const issuedFor: Record<string, IssuedCertificate> = {};

  beforeAll(() => {
    assertBuilt();
    certs = makeCertificates();
    work = mkdtempSync(join(tmpdir(), 'tollgate-production-doc-'));
  });
  afterAll(() => {
    certs?.remove();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /**
   * The block with /etc/tollgate-tls/<dir>/ pointing at a directory of real files: tls.crt and tls.key, a certificate
   * and key signed by the test CA, and ca.crt, that CA.
   */
  function withCertificates(yaml: string, name: string): string {
    const root = join(work, name);
    for (const dir of new Set([...yaml.matchAll(/\/etc\/tollgate-tls\/([\w-]+)\//g)].map((m) => m[1]!))) {
      mkdirSync(join(root, dir), { recursive: true });
      const issued = (issuedFor[dir] ??= certs.issue(dir));
      cpSync(issued.certFile, join(root, dir, 'tls.crt'));
      cpSync(issued.keyFile, join(root, dir, 'tls.key'));
      cpSync(certs.caFile, join(root, dir, 'ca.crt'));
    }
    return yaml.replaceAll('/etc/tollgate-tls/', `${root}/`);
  }

  const yamlBlocks = blocks('yaml');
  const configBlocks = yamlBlocks.filter((b) => Object.keys((parse(b.text) as object) ?? {}).every((k) => SECTIONS.includes(k)));

  it('every YAML block is a config block or the kustomize images block (a new kind needs a check here)', () => {
    const other = yamlBlocks.filter((b) => !configBlocks.includes(b));
    expect(other.map((b) => Object.keys(parse(b.text) as object))).toEqual([['images']]);
    expect(configBlocks.length).toBeGreaterThanOrEqual(4);
  });

  it.each(configBlocks.map((b) => [b.line, b.text] as const))(
    'the config block at line %i passes `tollgate config check`, its optional lines too',
    async (line, text) => {
      for (const [variant, yaml] of [
        ['as written', text],
        ['optional lines on', uncommented(text)],
      ] as const) {
        const file = join(work, `block-${line}-${variant.replace(/ /g, '-')}.yaml`);
        writeFileSync(file, withCertificates(yaml, `b${line}`));
        const r = await runCli(['config', 'check', '--config', file]);
        expect({ variant, code: r.code, stderr: r.stderr }).toEqual({ variant, code: 0, stderr: '' });
        expect(r.stdout).toContain(': OK (');
      }
    },
    60_000,
  );

  it('the check of a block can fail: a field the schema lacks, and a service tls block without its caFile', { timeout: 60_000 }, async () => {
    const services = configBlocks.find((b) => b.text.startsWith('services:'))!.text;
    for (const [yaml, expected] of [
      [services.replace('servername:', 'servernam:'), 'unknown field; did you mean servername?'],
      [services.replace(/^\s+caFile:.*\n/m, ''), 'services.orders.tls.caFile: expected string, got nothing'],
    ] as const) {
      const file = join(work, 'broken.yaml');
      writeFileSync(file, withCertificates(yaml, 'broken'));
      const r = await runCli(['config', 'check', '--config', file]);
      expect(r.code).toBe(1);
      expect(r.stderr + r.stdout).toContain(expected);
    }
  });

  it('the images block pins the gateway image as written (kubectl kustomize of an overlay of the base)', () => {
    const block = yamlBlocks.find((b) => b.text.startsWith('images:'))!.text;
    const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;
    const copy = join(work, 'kubernetes');
    cpSync(join(REPO, 'deploy', 'kubernetes'), copy, { recursive: true });
    mkdirSync(join(copy, 'mine'));
    writeFileSync(join(copy, 'mine', 'kustomization.yaml'), `resources:\n  - ../base\n${block.replace(/sha256:<[^>]+>/, digest)}`);
    const r = spawnSync('kubectl', ['kustomize', join(copy, 'mine')], { encoding: 'utf8', timeout: 60_000 });
    expect(r.error, 'kubectl (Debian: kubernetes-client) is needed').toBeUndefined();
    expect(r.stderr).toBe('');
    const images = parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as { kind?: string; spec?: { template?: { spec?: { containers?: Array<{ image: string }> } } } })
      .filter((o) => o.kind === 'Deployment')
      .flatMap((o) => o.spec?.template?.spec?.containers?.map((c) => c.image) ?? []);
    const pin = parse(block) as { images: Array<{ newName: string; newTag: string }> };
    expect(images).toContain(`${pin.images[0]!.newName}:${pin.images[0]!.newTag}@${digest}`);
    expect(pin.images[0]!.newTag).toBe((JSON.parse(read('package.json')) as { version: string }).version);
  });

  it('every config field it names is in the schema, with a value the schema allows', () => {
    // (A quoted `config check` answer, "ban.enabeld: unknown field; ...", is checked against the CLI below.)
    const named = spans.filter((s) => new RegExp(`^(${SECTIONS.join('|')})\\.`).test(s) && !s.includes('unknown field'));
    expect(named.length).toBeGreaterThan(20);
    const wrong: string[] = [];
    for (const s of named) {
      // "redis.failMode: open", "redis.sentinel: { masterName, sentinels }", "ban.durationsSeconds[0]"
      const m = /^([\w.<>[\]]+)(?::\s*(.*))?$/.exec(s);
      const node = m && fieldAt(m[1]!);
      if (!node) {
        wrong.push(s);
        continue;
      }
      const value = m[2]?.trim();
      if (value?.startsWith('{')) {
        for (const child of value.slice(1, -1).split(',')) if (!fieldAt(`${m[1]}.${child.trim()}`)) wrong.push(`${s} (${child.trim()})`);
      } else if (value !== undefined && node.enum && !node.enum.includes(value)) wrong.push(`${s} (not one of ${node.enum.join(', ')})`);
    }
    expect(wrong).toEqual([]);
  });

  it('quotes `config check` on a misspelt field as it answers', { timeout: 60_000 }, async () => {
    const quoted = spans.filter((s) => / unknown field; did you mean \w+\?$/.test(s));
    expect(quoted.length).toBeGreaterThanOrEqual(1);
    for (const q of quoted) {
      // "ban.enabeld: unknown field; ..." → ban: { enabeld: true }
      const path = q.slice(0, q.indexOf(':')).split('.');
      const config = path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), true);
      const file = join(work, 'misspelt.yaml');
      writeFileSync(file, JSON.stringify(config));
      const r = await runCli(['config', 'check', '--config', file]);
      expect(r.code).toBe(1);
      expect(r.stdout + r.stderr).toContain(`  ${q}\n`);
    }
  });

  it('every metric and alert it names exists', () => {
    const metricsSource = read('src/observability/metrics.ts');
    const alerts = read('deploy/prometheus/alerts.yml') + read('deploy/kubernetes/base/prometheus-rule.yaml');
    const metrics = spans.flatMap((s) => [...s.matchAll(/\btollgate_[a-z_]+/g)].map((m) => m[0]));
    const alertNames = spans.filter((s) => /^Tollgate[A-Z]\w+$/.test(s));
    expect(metrics.length).toBeGreaterThanOrEqual(3);
    expect(alertNames.length).toBeGreaterThanOrEqual(2);
    expect(metrics.filter((m) => !metricsSource.includes(`name: '${m}'`))).toEqual([]);
    expect(alertNames.filter((a) => !alerts.includes(`alert: ${a}`))).toEqual([]);
  });

  it('every file, overlay, Secret, mount path and Deployment it names is in the repository', () => {
    const missing: string[] = [];
    for (const s of spans) {
      if (/^(deploy|config|docs|src|bench|\.github)\/[\w./-]+$/.test(s) && !existsSync(join(REPO, s))) missing.push(s);
    }
    // The overlays table: "| `first-install` | ...", "| `redis-sentinel`, `redis-cluster` | ...".
    const overlays = [...PAGE.matchAll(/^\| (`[\w-]+`(?:, `[\w-]+`)*) \|/gm)].flatMap((m) => [...m[1]!.matchAll(/`([\w-]+)`/g)].map((n) => n[1]!));
    expect(overlays).toEqual(expect.arrayContaining(['first-install', 'redis-sentinel', 'redis-cluster', 'ingress-tls', 'gateway-tls']));
    for (const o of overlays) if (!existsSync(join(REPO, 'deploy', 'kubernetes', o, 'kustomization.yaml'))) missing.push(`overlay ${o}`);
    const manifests = [
      'base/deployment.yaml',
      'ingress-tls/ingress.yaml',
      'gateway-tls/deployment-tls.yaml',
      'gateway-tls/ingress-https-backend.yaml',
      'gateway-tls/gateway.yaml',
    ]
      .map((f) => read(`deploy/kubernetes/${f}`))
      .join('\n');
    const secrets = spans.filter((s) => /^tollgate-[\w-]+$/.test(s));
    expect(secrets).toEqual(expect.arrayContaining(['tollgate-tls', 'tollgate-admin-tls', 'tollgate-ingress-tls', 'tollgate-tls-ca', 'tollgate-secrets']));
    for (const s of secrets) if (!new RegExp(`(secretName: |proxy-ssl-secret: [\\w-]+/|name: )${s}\\b`).test(manifests)) missing.push(`Secret ${s}`);
    const mounts = spans.filter((s) => s.startsWith('/etc/tollgate-tls/'));
    expect(mounts.length).toBeGreaterThanOrEqual(2);
    for (const p of mounts) if (!manifests.includes(`mountPath: ${p}`)) missing.push(`mount ${p}`);
    for (const m of PAGE.matchAll(/deployment\/([\w-]+)/g)) if (!read('deploy/kubernetes/base/deployment.yaml').includes(`name: ${m[1]}\n`)) missing.push(m[0]);
    expect(missing).toEqual([]);
  });

  it('every tollgate command it shows exists with the options it gives', { timeout: 60_000 }, async () => {
    const commands = [...new Set(spans.filter((s) => s.startsWith('tollgate ') && !s.startsWith('tollgate:')))];
    expect(commands.length).toBeGreaterThanOrEqual(4);
    const helpOf = async (path: string[]): Promise<string> => {
      const r = await runCli([...path, '--help']);
      return r.code === 0 && r.stdout.startsWith(`Usage: tollgate ${path.join(' ')} `) ? r.stdout : '';
    };
    const wrong = await Promise.all(
      commands.map(async (command) => {
        const words = command.split(' ').slice(1);
        const stop = words.findIndex((w) => w.startsWith('-') || /[./]/.test(w));
        const path = stop < 0 ? words : words.slice(0, stop);
        // The longest prefix of words that is a command: `keys import` of `keys import --config gateway.yaml keys.jsonl`.
        let help = '';
        for (let n = path.length; n > 0 && !help; n--) help = await helpOf(path.slice(0, n));
        if (!help) return [`${command}: no such command`];
        return words.filter((w) => w.startsWith('--') && !help.includes(`${w} `) && !help.includes(`${w}\n`)).map((w) => `${command}: no ${w}`);
      }),
    );
    expect(wrong.flat()).toEqual([]);
  });

  it("quotes the CLI's line naming the config and Redis as the CLI writes it", () => {
    const quoted = blocks('')
      .find((b) => b.text.startsWith('tollgate: config '))!
      .text.trim();
    expect(quoted).toBe(touchesLine('/srv/tollgate/gateway.yaml', '--config', { url: 'rediss://10.0.0.5:6379/0' }, 'config').trim());
  });

  it('quotes the refusal of a change made with the example config as the CLI prints it', async () => {
    const quoted = blocks('')
      .find((b) => b.text.startsWith('error: refusing'))!
      .text.trim();
    const r = await runCli(['keys', 'create', '--plan', 'free']);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(quoted);
    expect(r.stdout).toBe('');
  });
});
