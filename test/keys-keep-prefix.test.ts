// Keeping an imported key's prefix on rotation through the admin API and the dashboard, on a gateway composed as
// `tollgate serve` composes it, on real Redis (auth.foreignKeys: true): POST /keys/import?map=... renames columns and
// records the prefix; the key record shows it; POST /keys/{id}/rotate {keepPrefix: true} gives a key with it that /v1
// accepts, and is refused (409 prefix_not_kept, key_revoked, 400 for a non-boolean) where it cannot; every answer is
// checked against docs/admin.openapi.yaml. In real Chromium, the rotate dialog offers "Keep the prefix sk_live_" only
// for a key that has one, and rotating with it ticked shows a key with that prefix. Screenshots:
// test-results/screenshots/keep-prefix-*.png.
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { generateAdminToken } from '../src/admin/tokens.js';
import { openSignedIn, shot, startAdminGateway, useBrowser } from './helpers/browser.js';
import { CheckedApi } from './helpers/openapi.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const stack = useStack({
  redis: true,
  gateway: (s) => startAdminGateway(s, TOKEN, 'keep:', { auth: { foreignKeys: true }, plans: { free: { perMinute: 100, perDay: 1000 } } }),
});
const chromium = useBrowser();
const api = new CheckedApi({ target: () => stack.gw.composed.adminApp!, token: TOKEN });
const legacy = `sk_live_${randomBytes(16).toString('hex')}`;
const plain = `x${randomBytes(20).toString('hex')}`;

async function call(key: string): Promise<number> {
  const res = await fetch(`${stack.gw.url}/v1/things`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

describe('the admin API', () => {
  it('imports with ?map=, records the prefix and shows it; rotate keepPrefix gives a key /v1 accepts, twice', async () => {
    const csv = `ref,tier,api_key,who\napi_a,free,${legacy},Acme\napi_b,free,${plain},Bolt\n`;
    const dry = await api.call('POST', '/keys/import?map=ref=id&map=tier=plan&map=api_key=key&map=who=name&dryRun=true', { body: csv, type: 'text/csv' });
    expect(dry.status, dry.text).toBe(200);
    expect(dry.body.lines).toEqual([
      { line: 2, action: 'import', id: 'api_a' },
      { line: 3, action: 'import', id: 'api_b' },
    ]);
    const r = await api.call('POST', '/keys/import?map=ref=id&map=tier=plan&map=api_key=key&map=who=name', { body: csv, type: 'text/csv' });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ imported: 2, unchanged: 0, refused: [], warnings: [], dryRun: false });
    expect(r.text).not.toContain(legacy);
    expect((await api.get('/keys/api_a')).body).toMatchObject({ id: 'api_a', name: 'Acme', prefix: 'sk_live_' });
    expect((await api.get('/keys/api_b')).body).not.toHaveProperty('prefix');

    const rotated = await api.call('POST', '/keys/api_a/rotate', { body: { keepPrefix: true } });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.key).toMatch(/^sk_live_[0-9A-Za-z]{49}$/);
    expect(rotated.body.prefix).toBe('sk_live_');
    expect(await call(rotated.body.key as string)).toBe(200);
    expect(await call(legacy)).toBe(401); // no grace
    const twice = await api.call('POST', '/keys/api_a/rotate', { body: { keepPrefix: true, graceSeconds: 60 } });
    expect(twice.body.key).toMatch(/^sk_live_[0-9A-Za-z]{49}$/);
    expect(await call(twice.body.key as string)).toBe(200);
    expect(await call(rotated.body.key as string)).toBe(200); // in its grace
    expect(api.problems.join('\n')).toBe('');
  });

  it('refuses keepPrefix without a prefix, on a revoked key, and when not a boolean; refuses a wrong map', async () => {
    const none = await api.call('POST', '/keys/api_b/rotate', { body: { keepPrefix: true } });
    expect(none.status).toBe(409);
    expect(none.body).toMatchObject({ code: 'prefix_not_kept' });
    expect(none.body.message).toContain('key api_b has no recorded prefix');
    expect(await call(plain)).toBe(200);
    expect((await api.call('POST', '/keys/api_b/rotate', { body: { keepPrefix: 'yes' } })).body).toMatchObject({ code: 'invalid_request' });
    const other = `pk_${randomBytes(16).toString('hex')}`;
    await api.call('POST', '/keys/import', { body: [{ id: 'api_rev', plan: 'free', key: other }] });
    expect((await api.call('POST', '/keys/api_rev/revoke', { body: {} })).status).toBe(200);
    const revoked = await api.call('POST', '/keys/api_rev/rotate', { body: { keepPrefix: true } });
    expect(revoked.status).toBe(409);
    expect(revoked.body).toMatchObject({ code: 'key_revoked' });
    const bad: Array<[string, string]> = [
      ['?map=api_key', 'query.map "api_key": expected OLD=NEW'],
      ['?map=api_key=kye', '(did you mean "key"?)'],
      ['?map=a=key&map=b=key', 'both map to "key"'],
      ['?map=apikey=key', 'the CSV header has no column "apikey"'],
    ];
    for (const [query, words] of bad) {
      const r = await api.call('POST', `/keys/import${query}`, { body: 'api_key,plan\nabc_defghijklmnopqrstu,free\n', type: 'text/csv' });
      expect(r.status, query).toBe(400);
      expect(r.body.code, query).toBe('invalid_request');
      expect(r.body.message, query).toContain(words);
    }
    expect(api.problems.join('\n')).toBe('');
  });
});

describe('the dashboard', () => {
  it('offers "Keep the prefix sk_live_" only for a key with a prefix; ticked, the new key shown has it', async () => {
    const { context, page } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN);
    try {
      // A key without a prefix: no checkbox in the dialog.
      await page.goto(`${stack.gw.adminUrl}/#/keys/api_b`);
      await page.getByRole('button', { name: 'Rotate', exact: true }).click();
      await page.locator('#rotate-key[open]').waitFor();
      expect(await page.locator('#rotate-keep-prefix-row').isVisible()).toBe(false);
      expect(await page.locator('#rotate-key').innerText()).not.toContain('Keep the prefix');
      await page.locator('#rotate-key button[value=cancel]').click();

      await page.goto(`${stack.gw.adminUrl}/#/keys/api_a`);
      await page.locator('text=sk_live_').first().waitFor();
      await page.getByRole('button', { name: 'Rotate', exact: true }).click();
      await page.locator('#rotate-key[open]').waitFor();
      const row = page.locator('#rotate-keep-prefix-row');
      expect(await row.isVisible()).toBe(true);
      expect((await row.innerText()).trim()).toBe('Keep the prefix sk_live_');
      // The checkbox sits beside its words, inside the dialog.
      const box = (await page.locator('#rotate-keep-prefix').boundingBox())!;
      const words = (await page.locator('#rotate-prefix').boundingBox())!;
      const dialog = (await page.locator('#rotate-key').boundingBox())!;
      expect(box.width).toBeGreaterThan(8);
      expect(Math.abs(box.y + box.height / 2 - (words.y + words.height / 2))).toBeLessThan(8);
      expect(box.x + box.width).toBeLessThan(words.x);
      expect(words.x + words.width).toBeLessThanOrEqual(dialog.x + dialog.width);
      await page.locator('#rotate-keep-prefix').check();
      await page.locator('#rotate-grace').fill('0');
      await shot(page, 'keep-prefix-dialog', { fullPage: false });
      await page.locator('#rotate-key button[value=rotate]').click();
      await page.locator('#new-key[open]').waitFor();
      const shown = (await page.locator('#new-key-value').innerText()).trim();
      expect(shown).toMatch(/^sk_live_[0-9A-Za-z]{49}$/);
      await shot(page, 'keep-prefix-new-key', { fullPage: false });
      expect(await call(shown)).toBe(200);
    } finally {
      await context.close();
    }
  }, 60_000);
});
