// The docs hold together: every relative link in README.md, docs/*.md and bench/README.md names a file that exists
// and, for a Markdown file, a heading it has; and README.md stays a front page (well under half the size it had when
// every reference lived in it: 93 KB).
import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FILES = [
  'README.md',
  'bench/README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_~]/g, '')
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');
}

const anchors = new Map(
  FILES.map((f) => [normalize(f), new Set([...readFileSync(join(ROOT, f), 'utf8').matchAll(/^#{1,6} (.*)$/gm)].map((m) => slug(m[1]!)))]),
);

describe('the docs', () => {
  it('every relative link resolves to a file, and to a heading of a Markdown file', () => {
    const broken: string[] = [];
    for (const f of FILES) {
      for (const m of readFileSync(join(ROOT, f), 'utf8').matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        const [path, fragment] = target.split('#') as [string, string | undefined];
        const file = path ? normalize(join(dirname(f), path)) : normalize(f);
        if (!existsSync(join(ROOT, file))) broken.push(`${f}: ${target} (no such file)`);
        else if (fragment && file.endsWith('.md') && !anchors.get(file)?.has(fragment)) broken.push(`${f}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('README.md is a front page: under 40 KB, linking every page of docs/', () => {
    expect(statSync(join(ROOT, 'README.md')).size).toBeLessThan(40_000);
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    for (const f of FILES.filter((x) => x.startsWith('docs/'))) expect(readme, f).toContain(`](${f})`);
  });
});
