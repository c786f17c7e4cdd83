// The import rule `npm run lint` enforces (.dependency-cruiser.cjs, docs/architecture.md "Layers"), tried on small
// trees of its own: an upward import fails, a type-only one too (the reason dependency-cruiser was chosen), a cycle
// fails with its modules named, a module outside every room fails, and a downward or sideways import passes. The
// repository's own src/ passing is what `npm run lint` checks; this checks that the rule would catch a breach.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '..');
const DEPCRUISE = join(REPO, 'node_modules', '.bin', 'depcruise');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Runs the repository's rule over a tree of the files given (path under the tree -> source). */
async function cruise(files: Record<string, string>): Promise<{ code: number; out: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-import-rule-'));
  dirs.push(dir);
  for (const f of ['.dependency-cruiser.cjs', 'tsconfig.json']) copyFileSync(join(REPO, f), join(dir, f));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return new Promise((resolve) => {
    execFile(DEPCRUISE, ['src', '--output-type', 'err'], { cwd: dir, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
    });
  });
}

describe('the import rule', () => {
  it('passes imports that point down or sideways', async () => {
    const r = await cruise({
      'src/util/time.ts': 'export const MS = 1;\n',
      'src/config/a.ts': "import { MS } from '../util/time.js';\nexport const A = MS;\n",
      'src/storage/b.ts': "import { A } from '../config/a.js';\nexport const B = A;\n",
      'src/keys/k.ts': "import { B } from '../storage/b.js';\nexport const K = B;\n",
      'src/limits/l.ts': "import { K } from '../keys/k.js';\nexport const L = K;\n",
      'src/pipeline/p.ts': "import { L } from '../limits/l.js';\nexport const P = L;\n",
      'src/compose.ts': "import { P } from './pipeline/p.js';\nexport const C = P;\n",
    });
    expect(r.out).toContain('no dependency violations found');
    expect(r.code).toBe(0);
  });

  it('fails an import that points up, a type-only one included, naming the rule and both modules', async () => {
    const r = await cruise({
      'src/keys/k.ts': "import type { L } from '../limits/l.js';\nexport type K = L;\n",
      'src/limits/l.ts': 'export type L = number;\n',
      'src/util/u.ts': "import { P } from '../pipeline/p.js';\nexport const U = P;\n",
      'src/pipeline/p.ts': 'export const P = 1;\n',
    });
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/keys-not-up: src\/keys\/k\.ts → src\/limits\/l\.ts/);
    expect(r.out).toMatch(/util-not-up: src\/util\/u\.ts → src\/pipeline\/p\.ts/);
    expect(r.out).toMatch(/2 dependency violations \(2 errors/);
  });

  it('orders the domain routing < keys < consumers < identity < limits: down passes, up fails', async () => {
    const down = await cruise({
      'src/keys/k.ts': 'export const K = 1;\n',
      'src/consumers/c.ts': "import { K } from '../keys/k.js';\nexport const C = K;\n",
      'src/identity/i.ts': "import { C } from '../consumers/c.js';\nexport const I = C;\n",
      'src/limits/l.ts': "import { I } from '../identity/i.js';\nexport const L = I;\n",
    });
    expect(down.out).toContain('no dependency violations found');
    const up = await cruise({
      'src/consumers/c.ts': "import type { I } from '../identity/i.js';\nexport type C = I;\n",
      'src/identity/i.ts': "import type { L } from '../limits/l.js';\nexport type I = L;\n",
      'src/keys/k.ts': "import type { C } from '../consumers/c.js';\nexport type K = C;\n",
      'src/limits/l.ts': 'export type L = number;\n',
    });
    expect(up.code).not.toBe(0);
    expect(up.out).toMatch(/consumers-not-up: src\/consumers\/c\.ts → src\/identity\/i\.ts/);
    expect(up.out).toMatch(/identity-not-up: src\/identity\/i\.ts → src\/limits\/l\.ts/);
    expect(up.out).toMatch(/keys-not-up: src\/keys\/k\.ts → src\/consumers\/c\.ts/);
  });

  it('fails a cycle within one room', async () => {
    const r = await cruise({
      'src/usage/a.ts': "import { B } from './b.js';\nexport const A = () => B;\n",
      'src/usage/b.ts': "import type { A } from './a.js';\nexport const B = 1;\nexport type X = typeof A;\n",
    });
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('no-circular');
    expect(r.out).toContain('src/usage/a.ts');
    expect(r.out).toContain('src/usage/b.ts');
  });

  it('fails a module in no room', async () => {
    const r = await cruise({
      'src/billing/view.ts': "import { U } from '../util/u.js';\nexport const V = U;\n",
      'src/util/u.ts': 'export const U = 1;\n',
    });
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/in-a-room: src\/billing\/view\.ts → src\/util\/u\.ts/);
  });
});
