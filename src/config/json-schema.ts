// The config schema as JSON Schema (draft 2020-12), generated from the zod schema with its descriptions and defaults:
// what `tollgate config schema` prints and config/gateway.schema.json holds, so editors (the YAML language server's
// modeline at the top of config/gateway.yaml) complete and check fields as they are typed. Rules zod checks in code
// (cross-field checks, route patterns) are not in it: `tollgate config check` still has the last word.
import { z } from 'zod';
import { configSchema } from './schema.js';

export function configJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return {
    $schema: generated.$schema,
    $id: 'https://tollgate.dev/schemas/gateway.schema.json',
    title: 'Tollgate gateway configuration',
    description: 'The gateway config file (YAML). Every field and its default; docs/configuration.md has the details.',
    ...Object.fromEntries(Object.entries(generated).filter(([k]) => k !== '$schema')),
  };
}
