// The OpenAPI documents' configs the benches measure, for run.mjs (scenarios o and v) and instructions.mjs
// (--variant): routing through a 500-operation document against scenario s's 50 hand-written routes, and request
// validation of the pet store's createCategory body in enforce against off. Kept in one place so the deterministic
// count and the wall-clock bench measure the same configs.
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const PETSTORE = join(REPO, 'docs/petstore.openapi.yaml');

/**
 * Scenario s's routing: three services of two targets each (six ports of the bench's upstream), every target
 * health-checked every 5 s (the default interval), and 50 routes of the kinds a real config has (prefixes, patterns,
 * exact paths, methods, hosts). The bench's path (/v1/bench) matches only the last route.
 */
export function servicesRouting(ports) {
  const services = threeServices(ports);
  const routes = [];
  for (let i = 0; i < 49; i++) {
    const service = `svc${i % 3}`;
    const kind = i % 4;
    if (kind === 0) routes.push({ path: `/api/r${i}/*`, service, stripPrefix: `/api/r${i}` });
    else if (kind === 1) routes.push({ path: `/v1/r${i}/items/:id`, method: 'GET', service });
    else if (kind === 2) routes.push({ path: `/v1/r${i}/status`, service, auth: 'none' });
    else routes.push({ path: `/v1/r${i}/*`, host: `r${i}.example.com`, service });
  }
  routes.push({ path: '/v1/*', service: 'svc0' });
  return { services, routes };
}

function threeServices(ports) {
  if (ports.length < 6) throw new Error(`services and routes need 6 upstream ports, got ${ports.length}`);
  const services = {};
  for (let i = 0; i < 3; i++)
    services[`svc${i}`] = {
      targets: [`http://127.0.0.1:${ports[2 * i]}`, `http://127.0.0.1:${ports[2 * i + 1]}`],
      healthCheck: { path: '/healthz' },
    };
  return services;
}

// 50 resources of 10 operations each: a collection (list, create), an item (get, replace, patch, delete), a
// sub-collection (list, create) and a sub-item (get, delete).
const NOUNS = (
  'accounts addresses alerts apps attachments audits balances batches brands budgets campaigns cards carts channels ' +
  'charges clients comments contracts coupons customers deliveries devices discounts disputes documents events exports ' +
  'files fleets groups imports invoices items jobs ledgers licenses locations messages notes orders payments payouts ' +
  'plans prices products projects quotes refunds reports shipments'
).split(' ');
const SUBS = ['notes', 'events', 'versions', 'members', 'tags'];

/**
 * A 500-operation OpenAPI 3.1 document (security bearer; list operations of every fifth resource public; request
 * bodies by $ref; path parameters typed) written to `dir`. `path`: the request the bench sends, the 499th operation
 * (GET of the last resource's sub-item), so it is near the end of the document and of the config's routes.
 */
export function writeDoc500(dir) {
  if (NOUNS.length !== 50) throw new Error(`expected 50 resource names, got ${NOUNS.length}`);
  const paths = {};
  const schemas = {
    Error: {
      type: 'object',
      required: ['code', 'message', 'status'],
      properties: { code: { type: 'string' }, message: { type: 'string' }, status: { type: 'integer' } },
    },
  };
  const ok = (description) => ({ 200: { description } });
  const id = (name) => ({ name, in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z0-9_-]{1,64}$' } });
  const page = [
    { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
    { name: 'cursor', in: 'query', schema: { type: 'string' } },
  ];
  NOUNS.forEach((noun, k) => {
    const Noun = `${noun[0].toUpperCase()}${noun.slice(1, -1)}`;
    const sub = SUBS[k % SUBS.length];
    schemas[`New${Noun}`] = {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 200 },
        description: { type: 'string', maxLength: 2000 },
        metadata: { type: 'object', additionalProperties: { type: 'string' } },
      },
    };
    const body = { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/New${Noun}` } } } };
    const subBody = {
      required: true,
      content: { 'application/json': { schema: { type: 'object', required: ['text'], properties: { text: { type: 'string', maxLength: 4000 } } } } },
    };
    paths[`/${noun}`] = {
      get: { operationId: `list_${noun}`, parameters: page, ...(k % 5 === 0 ? { security: [] } : {}), responses: ok(`A page of ${noun}.`) },
      post: { operationId: `create_${noun}`, requestBody: body, responses: { 201: { description: 'Created.' } } },
    };
    paths[`/${noun}/{id}`] = {
      parameters: [id('id')],
      get: { operationId: `get_${noun}`, responses: ok('One.') },
      put: { operationId: `replace_${noun}`, requestBody: body, responses: ok('Replaced.') },
      patch: {
        operationId: `update_${noun}`,
        requestBody: { ...body, content: { 'application/merge-patch+json': body.content['application/json'] } },
        responses: ok('Updated.'),
      },
      delete: {
        operationId: `delete_${noun}`,
        ...(k % 7 === 3 ? { deprecated: true, 'x-deprecated-at': '2026-09-01T00:00:00Z' } : {}),
        responses: { 204: { description: 'Deleted.' } },
      },
    };
    paths[`/${noun}/{id}/${sub}`] = {
      parameters: [id('id')],
      get: { operationId: `list_${noun}_${sub}`, parameters: page, responses: ok(`A page of ${sub}.`) },
      post: { operationId: `add_${noun}_${sub}`, requestBody: subBody, responses: { 201: { description: 'Added.' } } },
    };
    paths[`/${noun}/{id}/${sub}/{subId}`] = {
      parameters: [id('id'), id('subId')],
      get: { operationId: `get_${noun}_${sub}`, responses: ok('One.') },
      delete: { operationId: `remove_${noun}_${sub}`, responses: { 204: { description: 'Removed.' } } },
    };
  });
  const doc = {
    openapi: '3.1.0',
    info: { title: 'Bench: 500 operations', version: '1.0.0' },
    servers: [{ url: '/v1' }],
    security: [{ bearer: [] }],
    paths,
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } }, schemas },
  };
  const count = Object.values(paths).reduce((n, p) => n + Object.keys(p).filter((m) => m !== 'parameters').length, 0);
  if (count !== 500) throw new Error(`the document has ${count} operations, not 500`);
  const file = join(dir, 'bench-500-operations.openapi.yaml');
  writeFileSync(file, stringify(doc));
  const last = NOUNS.at(-1);
  return { file, operations: count, path: `/v1/${last}/r-42/${SUBS[(NOUNS.length - 1) % SUBS.length]}/n-7` };
}

/** Scenario s's three services, the 500-operation document as svc0's (validate off), no hand-written routes. */
export function doc500Routing(ports, docFile) {
  const services = threeServices(ports);
  services.svc0.openapi = { file: docFile, validate: 'off' };
  return { services };
}

/** The pet store's document as the upstream's (its operations under /v1 go to the bench's upstream). */
export function petstoreRouting(upstreamUrl, validate) {
  return { upstream: { url: upstreamUrl, openapi: { file: PETSTORE, validate } } };
}

/** createCategory's body in the requests: valid, 15 bytes. */
export const CATEGORY_BODY = '{"name":"Dog"}';
