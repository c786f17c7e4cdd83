// What request validation costs per request: the pet store's POST /v1/categories (docs/petstore.openapi.yaml,
// operationId createCategory) validated with the compiled validator (dist/validation/validator.js) in a loop, as the
// request path calls it: the body's bytes parsed (UTF-8, JSON, depth checked) and checked against NewCategory, the
// parameters read. Reported: the median microseconds per validation over many batches, with the spread of the
// batches as the machine's noise; a valid body and an invalid one (its problems listed). Also what compiling costs:
// one operation's first use, and a document of 10,000 operations compiled whole, which is why schemas compile on
// first use rather than at every config load. No server, no Redis: CPU only.
//
//   npm run bench:validation                       # build, then 40 batches of 20,000 validations each
//   node bench/validation-cost.mjs --batches 10 --per-batch 5000 --operations 2000
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parse } from 'yaml';
import { compileRequestValidator } from '../dist/validation/validator.js';

const { values: args } = parseArgs({
  options: {
    batches: { type: 'string', default: '40' },
    'per-batch': { type: 'string', default: '20000' },
    operations: { type: 'string', default: '10000' },
  },
});
const BATCHES = Number(args.batches);
const PER_BATCH = Number(args['per-batch']);
const OPERATIONS = Number(args.operations);

const document = parse(readFileSync(new URL('../docs/petstore.openapi.yaml', import.meta.url), 'utf8'));

/** The operation as the document loader hands it to routes (src/openapi/operations.ts). */
function operationOf(doc, path, method, basePath = '/v1') {
  const op = doc.paths[path][method];
  return {
    service: 'petstore',
    file: 'docs/petstore.openapi.yaml',
    pointer: `/paths/${path.replaceAll('~', '~0').replaceAll('/', '~1')}/${method}`,
    operationId: op.operationId,
    method: method.toUpperCase(),
    pathTemplate: `${basePath}${path}`,
    document: doc,
    parameters: [...(doc.paths[path].parameters ?? []), ...(op.parameters ?? [])],
    requestBody: op.requestBody,
    openapiVersion: doc.openapi.startsWith('3.1') ? '3.1' : '3.0',
    validate: 'enforce',
  };
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
const round = (n, d = 2) => Math.round(n * 10 ** d) / 10 ** d;

function measure(validator, input, expectProblems) {
  const first = validator.validate(input);
  if (first.length > 0 !== expectProblems) throw new Error(`unexpected result: ${JSON.stringify(first)}`);
  // Warm-up: V8 optimises the generated code before anything is timed.
  for (let i = 0; i < PER_BATCH; i++) validator.validate(input);
  const perValidation = [];
  let sink = 0;
  for (let b = 0; b < BATCHES; b++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < PER_BATCH; i++) sink += validator.validate(input).length;
    perValidation.push(Number(process.hrtime.bigint() - start) / 1000 / PER_BATCH);
  }
  perValidation.sort((a, b) => a - b);
  return {
    sink,
    problems: first,
    median: perValidation[perValidation.length >> 1],
    p10: percentile(perValidation, 0.1),
    p90: percentile(perValidation, 0.9),
    min: perValidation[0],
    max: perValidation.at(-1),
  };
}

const body = (json) => {
  const rawBody = Buffer.from(JSON.stringify(json));
  return { path: {}, query: '', headers: { 'content-type': 'application/json', 'content-length': String(rawBody.length) }, rawBody };
};

// One operation: its first use compiles its schemas.
const create = operationOf(document, '/categories', 'post');
const validator = compileRequestValidator(create);
let t = process.hrtime.bigint();
validator.validate(body({ name: 'Dog' }));
const firstUseMs = Number(process.hrtime.bigint() - t) / 1e6;

const typical = body({ name: 'Rabbit', description: 'Small, long-eared, kept indoors or in a hutch; about 1.5 kg on average.' });
const invalid = body({ name: '', description: 7, colour: 'brown' });
const valid = measure(validator, typical, false);
const wrong = measure(validator, invalid, true);

// A document of many operations, compiled whole (what eager compilation at every config load would cost).
const big = { openapi: '3.1.0', info: { title: 'many', version: '1' }, paths: {}, components: document.components };
for (let i = 0; i < OPERATIONS; i++) {
  big.paths[`/things${i}/{id}`] = {
    post: {
      operationId: `op${i}`,
      parameters: [
        { name: 'id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } },
        { name: 'limit', in: 'query', schema: { type: 'integer', maximum: 100 } },
      ],
      requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewCategory' } } } },
    },
  };
}
const ops = Object.keys(big.paths).map((p) => operationOf(big, p, 'post', ''));
t = process.hrtime.bigint();
const validators = ops.map((op) => compileRequestValidator(op));
const constructMs = Number(process.hrtime.bigint() - t) / 1e6;
t = process.hrtime.bigint();
for (const v of validators) v.validate({ path: { id: '1' }, query: '', headers: typical.headers, rawBody: typical.rawBody });
const compileAllMs = Number(process.hrtime.bigint() - t) / 1e6;

const result = {
  node: process.version,
  batches: BATCHES,
  perBatch: PER_BATCH,
  createCategory: {
    validBody: typical.rawBody.length,
    validUs: { median: round(valid.median), p10: round(valid.p10), p90: round(valid.p90), min: round(valid.min), max: round(valid.max) },
    invalidUs: { median: round(wrong.median), p10: round(wrong.p10), p90: round(wrong.p90), min: round(wrong.min), max: round(wrong.max) },
    invalidProblems: wrong.problems,
    firstUseMs: round(firstUseMs, 1),
  },
  manyOperations: {
    operations: OPERATIONS,
    validatorsMadeMs: round(constructMs, 1),
    allCompiledMs: round(compileAllMs, 0),
    perOperationMs: round(compileAllMs / OPERATIONS, 3),
  },
};
console.log(JSON.stringify(result, null, 2));
const target = 10;
console.log(
  `createCategory: median ${round(valid.median)} µs per valid body (batches ${round(valid.p10)}-${round(valid.p90)} µs, p10-p90), ` +
    `${round(wrong.median)} µs per invalid one; target under ${target} µs: ${valid.median < target ? 'met' : 'NOT met'}`,
);
