// docs/portal.md held to what a running gateway does: its Node snippet (a platform backend asking the admin API for a
// sign-in link and redirecting the browser to it) run as written, as a process of its own, against a built
// `tollgate serve` with its portal listener on a real redis-server; its redirect followed like a browser would, to a
// session on the portal; and what the page says of that flow checked on the answers: the cookie's flags, no referrer,
// a link used once, the code never in the gateway's log, an actor's sessions ended by the admin API, the key sign-in
// limit per address. And the "Turning it on" lines pass `config check`.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { assertBuilt, cleanEnv, cliOk, CliProcess, REPO, runCli, startServe, tempDir } from './helpers/cli.js';
import { track } from './helpers/children.js';
import { freePort } from './helpers/redis-server.js';
import { useStack } from './helpers/stack.js';
import { waitFor } from './helpers/wait.js';

const DOC = readFileSync(join(REPO, 'docs/portal.md'), 'utf8');
const TOKEN = generateAdminToken();
const SIGN_INS_PER_MINUTE = 3;

/** The first fenced block of `lang` in the section that starts at `heading`. */
function block(heading: string, lang: string): string {
  const at = DOC.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`no "${heading}" in docs/portal.md`);
  const m = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(DOC.slice(at));
  if (!m) throw new Error(`no ${lang} block under "${heading}" in docs/portal.md`);
  return m[1]!;
}

const stack = useStack({ redis: true });
const dir = tempDir();
let gw: { proc: CliProcess; adminUrl: string; portalUrl: string; file: string };
let backend: ChildProcess | undefined;

beforeAll(async () => {
  assertBuilt();
  const file = dir.write('portal-docs.yaml', {
    server: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, tokens: [{ id: 'platform', sha256: hashAdminToken(TOKEN) }] },
    portal: { host: '127.0.0.1', port: 0, signInsPerMinute: SIGN_INS_PER_MINUTE },
    upstream: { url: stack.up.url },
    redis: { url: stack.redis.url, prefix: 'docs-portal:' },
    plans: { pro: { perMinute: 100, perDay: 1000 } },
  });
  const { proc } = await startServe(file);
  const admin = await proc.waitForLog('admin API listening');
  const portal = await proc.waitForLog('portal listening');
  gw = { proc, adminUrl: String(admin.url), portalUrl: String(portal.url), file };
  await cliOk(['consumers', 'create', '--id', 'acme', '--name', 'Acme Corp', '--plan', 'pro', '--yes', '--quiet', '--config', file]);
}, 120_000);

afterAll(async () => {
  if (backend && backend.exitCode === null) {
    const gone = new Promise((r) => backend!.once('exit', r));
    backend.kill('SIGKILL');
    await gone;
  }
  await CliProcess.killAll();
  dir.remove();
});

/** The session cookie's name=value from a Set-Cookie answer, and the whole header. */
function sessionCookie(res: Response): { pair: string; header: string } | undefined {
  const header = res.headers.getSetCookie().find((c) => c.startsWith('tollgate_portal='));
  return header ? { pair: header.split(';')[0]!, header } : undefined;
}

describe('docs/portal.md: signing people in from your platform', () => {
  it('the Node snippet, run as written, redirects the browser to a one-time link that opens a session for the actor it named', async () => {
    const snippet = join(dir.dir, 'platform-backend.mjs');
    writeFileSync(snippet, block('## Signing people in from your platform', 'js'));
    const port = await freePort();
    backend = track(
      spawn(process.execPath, [snippet], {
        env: cleanEnv({ TOLLGATE_ADMIN_URL: gw.adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN, PORT: String(port) }),
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let stderr = '';
    backend.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const platform = `http://127.0.0.1:${port}`;
    await waitFor(
      async () =>
        (await fetch(`${platform}/nothing`).then(
          (r) => r.status,
          () => 0,
        )) === 404,
      'the snippet to listen',
      30_000,
      100,
    );

    // The browser asks the platform for "API usage": 303 to the portal's link.
    const hop = await fetch(`${platform}/api-usage`, { redirect: 'manual' });
    expect(hop.status, stderr).toBe(303);
    expect(hop.headers.get('cache-control')).toBe('no-store');
    const link = new URL(hop.headers.get('location')!);
    expect(`${link.origin}${link.pathname}`).toBe(`${gw.portalUrl}/link`);
    const code = link.searchParams.get('code')!;
    expect(code).toMatch(/^[\w-]{43}$/);

    // The portal exchanges it: 303 to the page, the session cookie with the flags the page states (no Secure: plain HTTP).
    const opened = await fetch(link, { redirect: 'manual' });
    expect(opened.status).toBe(303);
    expect(opened.headers.get('location')).toBe('/');
    expect(opened.headers.get('referrer-policy')).toBe('no-referrer');
    expect(opened.headers.get('cache-control')).toBe('no-store');
    const cookie = sessionCookie(opened)!;
    expect(cookie).toBeDefined();
    const flags = cookie.header.split(';').map((f) => f.trim().toLowerCase());
    expect(flags).toEqual(expect.arrayContaining(['httponly', 'samesite=strict', 'path=/']));
    expect(flags.some((f) => f.startsWith('max-age='))).toBe(true);
    expect(flags).not.toContain('secure');

    const me = await fetch(`${gw.portalUrl}/api/me`, { headers: { cookie: cookie.pair } });
    expect(me.status).toBe(200);
    expect(me.headers.get('referrer-policy')).toBe('no-referrer');
    expect(await me.json()).toMatchObject({
      consumer: { id: 'acme', name: 'Acme Corp', plan: 'pro', status: 'active' },
      session: { kind: 'link', actor: 'jane@acme.example', scopes: ['keys:read', 'keys:write', 'usage:read'] },
    });

    // Used once: the same link again is the 410 page, with no cookie.
    const again = await fetch(link, { redirect: 'manual' });
    expect(again.status).toBe(410);
    expect(sessionCookie(again)).toBeUndefined();
    expect(await again.text()).toContain('This sign-in link has been used, has expired or was withdrawn.');

    // The code is in no line the gateway wrote (the portal's request log writes the path alone).
    expect(gw.proc.stdout + gw.proc.stderr).not.toContain(code);

    // Ending the actor's sessions through the admin API ends this one at once.
    const ended = await fetch(`${gw.adminUrl}/consumers/acme/portal-sessions?actor=${encodeURIComponent('jane@acme.example')}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(ended.status).toBe(200);
    expect(await ended.json()).toMatchObject({ consumer: 'acme', actor: 'jane@acme.example' });
    const after = await fetch(`${gw.portalUrl}/api/me`, { headers: { cookie: cookie.pair } });
    expect(after.status).toBe(401);
    expect(await after.json()).toMatchObject({ code: 'portal_session_required', status: 401 });
  }, 90_000);

  it('key sign-in: signInsPerMinute attempts per address, then 429 with Retry-After before the key is looked at', async () => {
    const statuses: number[] = [];
    let last: Response | undefined;
    for (let i = 0; i <= SIGN_INS_PER_MINUTE; i++) {
      last = await fetch(`${gw.portalUrl}/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ key: 'tg_not-a-key' }),
      });
      statuses.push(last.status);
    }
    expect(statuses).toEqual([...Array<number>(SIGN_INS_PER_MINUTE).fill(401), 429]);
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await last!.json()).toMatchObject({ code: 'rate_limit_exceeded', status: 429 });
  });
});

describe('docs/portal.md: turning it on', () => {
  it('its config lines pass `tollgate config check` (the admin token given a real hash)', async () => {
    const config = parse(block('## Turning it on', 'yaml')) as { admin: { tokens: Array<{ sha256: string }> }; portal: Record<string, unknown> };
    expect(config.portal).toMatchObject({ port: 8081, sessionHours: 8, signInsPerMinute: 10 });
    config.admin.tokens[0]!.sha256 = hashAdminToken(TOKEN);
    const r = await runCli(['config', 'check', '--config', dir.write('turning-it-on.yaml', config)]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
});
