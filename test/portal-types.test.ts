// The portal page's views read only what the portal API answers: src/portal/public/api.d.ts is generated from
// docs/portal.openapi.yaml (and must be up to date), every view's api() call is typed by it, and tsc refuses a view
// that reads a field its answer's schema does not have.
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: a plain .mjs script, untyped.
import { generate, OUT } from '../scripts/gen-portal-types.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/** Runs tsc on a project (from its folder, so errors name files relative to it); its exit code and output. */
function tsc(project: string, cwd = ROOT): { code: number; out: string } {
  try {
    return { code: 0, out: execFileSync(process.execPath, [TSC, '-p', project], { encoding: 'utf8', cwd }) };
  } catch (err) {
    const e = err as { status: number; stdout: string };
    return { code: e.status, out: e.stdout };
  }
}

describe("the portal page's types", () => {
  it('api.d.ts is what the generator makes from docs/portal.openapi.yaml (run npm run gen:portal-types)', () => {
    expect(readFileSync(OUT as URL, 'utf8')).toBe((generate as () => string)());
  });

  it('a view reading a field its answer does not have, or an operation the API does not have, fails tsc', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-portal-types-'));
    try {
      const lib = join(ROOT, 'src/portal/public/lib.js');
      writeFileSync(
        join(dir, 'view.js'),
        [
          '// @ts-check',
          `import { api } from ${JSON.stringify(lib)};`,
          "const w = await api('GET /api/windows');",
          'console.log(w.pool[0]?.used, w.keys[0]?.ban?.until, w.pool[0]?.quotaLeft);',
          "await api('GET /api/consumers');",
          "await api('DELETE /api/webhooks/{id}', { params: { id: 'ep_1' } });",
          '',
        ].join('\n'),
      );
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ extends: join(ROOT, 'tsconfig.dashboard.json'), include: [], files: ['view.js'] }));
      const r = tsc(dir, dir);
      // tsc's exit status when it found type errors (a bad project or option would be another).
      expect(r.code).toBe(2);
      const errors = r.out.split('\n').filter((l) => l.startsWith('view.js'));
      // Exactly the two wrong ones: the fields that exist, and the operation answering 204, pass.
      expect(errors).toHaveLength(2);
      expect(errors[0]).toContain("Property 'quotaLeft' does not exist");
      expect(errors[1]).toContain('"GET /api/consumers"');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
