// Docs that restate the code, checked against it: the request path's stage picture (README.md, docs/request-path.md
// and the header of src/pipeline/stages.ts) against the stages requestPath runs, and the usage ledger's Redis key name.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Keyspace } from '../src/storage/keyspace.js';

const read = (path: string): string => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const STAGES_TS = read('src/pipeline/stages.ts');

/**
 * The stages requestPath runs, in order: the entries of its `return inSequence([...])`, one a line as Prettier writes
 * them, with `keyedRoutesOnly(...)` and the `...(p.keys ? [...] : [])` around the key stages looked through.
 */
function requestPathStages(source: string): string[] {
  const start = source.indexOf('return inSequence([');
  const end = source.indexOf('\n  ]);', start);
  if (start < 0 || end < 0) throw new Error('no "return inSequence([ ... ]);" in src/pipeline/stages.ts');
  return source
    .slice(start, end)
    .split('\n')
    .slice(1)
    .flatMap((line) => /^\s*(?:p\.)?(?:keyedRoutesOnly\()?([a-z]\w*)\b/.exec(line)?.[1] ?? []);
}

/** "0. normalizeRequestTarget", "R. ownEndpoints", "Q.  answerQuota": the stages a picture names, in order. */
function stagesPictured(picture: string): string[] {
  return [...picture.matchAll(/(?:^|\s)(?:\d{1,2}|[A-Z])\.\s+([a-z]\w+)/gm)].map((m) => m[1]!);
}

/** The picture between "client ──► 0." and the end of its code block. */
function pictureIn(markdown: string): string {
  const start = markdown.indexOf('client ──► 0.');
  return markdown.slice(start, markdown.indexOf('```', start));
}

describe('the request path picture', () => {
  // Stage 0 runs before Express routes (src/server/app.ts); Q answers the quota endpoint inside R.
  const main = requestPathStages(STAGES_TS);
  const expected = [
    'normalizeRequestTarget',
    ...main.slice(0, main.indexOf('ownEndpoints') + 1),
    'answerQuota',
    ...main.slice(main.indexOf('ownEndpoints') + 1),
  ];

  it('the code: stage 0 runs in the app before the request path; the quota endpoint ends in answerQuota', () => {
    expect(read('src/server/app.ts')).toMatch(/normalizeRequestTarget\(req\)/);
    expect(STAGES_TS).toMatch(/\? inSequence\(\[[^\]]*, answerQuota\([^)]*\)\]\)/);
    expect(main).toEqual([
      'observeRequest',
      'securityHeaders',
      'ownEndpoints',
      'matchRoute',
      'refuseAmbiguousPaths',
      'requireHealthyService',
      'authenticate',
      'anonymousLimit',
      'publicRouteLimits',
      'requireApiKey',
      'keyLimits',
      'routePolicy',
      'declaredBodyLimit',
      'prepareUpstreamHeaders',
      'proxyToUpstream',
    ]);
  });

  it.each([
    ['README.md', pictureIn(read('README.md'))],
    ['docs/request-path.md', pictureIn(read('docs/request-path.md'))],
    [
      'the header of src/pipeline/stages.ts',
      STAGES_TS.slice(0, STAGES_TS.indexOf('\nimport '))
        .split('\n')
        .map((l) => l.replace(/^\/\/ ?/, ''))
        .join('\n'),
    ],
  ])('%s names exactly the stages requestPath runs, in order', (_where, picture) => {
    const pictured = stagesPictured(picture);
    expect(pictured.filter((n) => n !== 'answerQuota')).toEqual(expected.filter((n) => n !== 'answerQuota'));
    expect(pictured.filter((n) => n === 'answerQuota')).toEqual(['answerQuota']);
  });

  it("README.md's picture is docs/request-path.md's, character for character", () => {
    expect(pictureIn(read('README.md'))).toBe(pictureIn(read('docs/request-path.md')));
  });
});

describe('the usage ledger key', () => {
  // The key Keyspace builds, with the docs' placeholders for the id and the day.
  const ledgerKey = new Keyspace('').usageDay('<id>', '<day>' as unknown as number);

  it.each(['docs/admin-api.md', 'docs/architecture.md', 'docs/keys-and-limits.md'])('%s names it as src/storage/keyspace.ts builds it', (doc) => {
    const text = read(doc)
      .replace(/<key id>/g, '<id>')
      .replace(/<UTC day>/g, '<day>');
    expect(text).toContain(`\`${ledgerKey}\``);
    expect(text).not.toMatch(/`usage:\{/);
  });
});
