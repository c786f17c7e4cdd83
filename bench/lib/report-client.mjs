// The report client of `bench/report-load.mjs`, in a process of its own, as a billing export or a dashboard runs on
// another machine: reading 20 pages of JSON here would otherwise stall the bench's load generator and show as the
// gateway's latency. Forked with the admin port, the token, the report's length in days and the key count; asked
// over IPC for one export ('export'), one overview ('overview'), or both back to back until 'stop' ('loop').
import { Agent, request } from 'node:http';

const [adminPort, token, days, keyCount] = process.argv.slice(2);
const PORT = Number(adminPort);
const DAYS = Number(days);
const KEYS = Number(keyCount);
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const auth = { authorization: `Bearer ${token}` };
const admin = new Agent({ keepAlive: true, maxSockets: 2 });
let periodSalt = 0;

function get(path) {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port: PORT, path, agent: admin, headers: auth }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', (err) => resolve({ status: 0, text: err.message }));
    req.setTimeout(120_000, () => req.destroy());
    req.end();
  });
}

/** Every page of a DAYS-day GET /usage, as a billing export fetches them: status, pages, time, and every id once. */
async function exportAll() {
  const now = Date.now();
  const base = `/usage?from=${new Date(now - DAYS * DAY_MS).toISOString()}&to=${new Date(now).toISOString()}&limit=1000`;
  const t0 = Date.now();
  const ids = new Set();
  let rows = 0;
  let pages = 0;
  let cursor = null;
  do {
    const r = await get(cursor ? `${base}&cursor=${cursor}` : base);
    pages++;
    if (r.status !== 200) return { kind: 'export', status: r.status, pages, ms: Date.now() - t0, complete: false, message: r.text.slice(0, 200) };
    const body = JSON.parse(r.text);
    for (const k of body.keys) ids.add(k.id);
    rows += body.keys.length;
    cursor = body.nextCursor;
  } while (cursor && pages < 10_000);
  return { kind: 'export', status: 200, pages, ms: Date.now() - t0, complete: ids.size === KEYS && rows === KEYS };
}

/** The dashboard overview's two summaries, over periods not seen before (so computed, not served from the cache). */
async function overview() {
  // A period of a length not asked before: the cache keeps figures by granularity and length.
  const now = Date.now();
  const salt = ++periodSalt * 1000;
  const t0 = Date.now();
  const rs = await Promise.all([
    get(`/usage/summary?granularity=hour&from=${new Date(now - 24 * HOUR_MS - salt).toISOString()}&to=${new Date(now).toISOString()}`),
    get(`/usage/summary?granularity=day&from=${new Date(now - 7 * DAY_MS - salt).toISOString()}&to=${new Date(now).toISOString()}`),
  ]);
  const bad = rs.find((r) => r.status !== 200);
  return { kind: 'overview', status: bad ? bad.status : 200, ms: Date.now() - t0, ...(bad ? { message: bad.text.slice(0, 200) } : {}) };
}

let stop = false;
process.on('message', async (m) => {
  if (m === 'export') process.send({ result: await exportAll() });
  else if (m === 'overview') process.send({ result: await overview() });
  else if (m === 'stop') stop = true;
  else if (m === 'loop') {
    stop = false;
    const results = [];
    // Reports back to back until told to stop (at least one export and one overview).
    do {
      results.push(await exportAll());
      results.push(await overview());
    } while (!stop);
    process.send({ results });
  }
});
process.send({ ready: true, port: 0 });
