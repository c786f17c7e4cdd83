// The config's JSON Schema for editors (docs: "Configuration reference"): `tollgate config schema` prints what the
// zod schema says, config/gateway.schema.json is exactly that output (so it cannot drift), the example configs carry
// the YAML language server's modeline and validate against it, and it catches what an editor should flag.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'yaml';
import { configJsonSchema } from '../src/config/json-schema.js';
import { cliOk } from './helpers/cli.js';

const file = (name: string) => new URL(`../config/${name}`, import.meta.url);
const committed = JSON.parse(readFileSync(file('gateway.schema.json'), 'utf8')) as Record<string, unknown>;

describe('the config JSON Schema', () => {
  it('config/gateway.schema.json is what `tollgate config schema` prints, generated from the zod schema', async () => {
    expect(committed, 'regenerate it: node dist/cli.js config schema > config/gateway.schema.json').toEqual(configJsonSchema());
    expect(JSON.parse((await cliOk(['config', 'schema'])).stdout)).toEqual(committed);
  });

  it('has a description and the default of the fields an editor shows', () => {
    const props = committed.properties as Record<string, { description?: string; properties?: Record<string, { description?: string; default?: unknown }> }>;
    for (const [name, section] of Object.entries(props)) {
      expect(section.description, name).toBeTruthy();
      for (const [field, p] of Object.entries(section.properties ?? {})) expect(p.description, `${name}.${field}`).toBeTruthy();
    }
    expect(props.server!.properties!.port!.default).toBe(8080);
    expect(props.redis!.properties!.commandTimeoutMs!.default).toBe(100);
  });

  it('every example config names it in its modeline and validates against it; mistakes are flagged', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    const validate = ajv.compile(committed);
    for (const name of ['gateway.yaml', 'compose.yaml']) {
      const text = readFileSync(file(name), 'utf8');
      expect(text.split('\n')[0], name).toBe('# yaml-language-server: $schema=./gateway.schema.json');
      expect(validate(parse(text)), `${name}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
    expect(validate({ server: { port: 'eighty' } })).toBe(false);
    expect(validate({ server: { prot: 8080 } })).toBe(false);
    expect(validate({ plans: { free: { perMinute: 0, perDay: 10 } } })).toBe(false);
    expect(validate({ log: { level: 'loud' } })).toBe(false);
  });
});
