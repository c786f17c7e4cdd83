// The soak's mixed workload: request classes, their expected answers, the checks every answer must pass, a paced
// scheduler with bounded concurrency, and the counters the summary is built from. Plain node:http, keep-alive.
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import * as zlib from 'node:zlib';

// ---------------------------------------------------------------------------------------------------------------
// the mix

/**
 * Shares of the total rate, in percent (they add up to 100). Admitted traffic (list, get, post-valid,
 * post-invalid, deprecated) runs on big-plan keys; the rest is refused one way or another.
 */
export const CLASSES = [
  { name: 'list', share: 5, what: 'GET /v1/categories, big-plan keys -> 200' },
  { name: 'get', share: 22, what: 'GET /v1/categories/{id}, big-plan keys -> 200' },
  { name: 'post-valid', share: 3, what: 'POST /v1/categories, valid JSON -> 201' },
  { name: 'post-invalid', share: 8, what: 'POST /v1/categories, bad JSON / bad fields -> 400' },
  { name: 'deprecated', share: 5, what: 'GET /v1/pets/1 past sunset -> 410; GET /v1/store/orders deprecated -> 200' },
  { name: 'refused', share: 15, what: 'tiny-plan keys over their minute limit -> 429 rate_limit_exceeded' },
  { name: 'banned', share: 15, what: 'one tiny-plan key hammered -> 429 api_key_banned, ban ladder [2,4,8] s' },
  { name: 'bad-key', share: 14, what: 'random well-formed-looking keys -> 401 invalid_api_key' },
  { name: 'anonymous', share: 13, what: 'no key / Basic auth, one IP -> 401 missing_api_key, then 429' },
];

export const TINY_PER_MINUTE = 2;
export const BIG_KEYS = 4;
export const REFUSED_KEYS = 8;
export const BANNED_KEYS = 2;
export const BAN_WINDOW_SECONDS = 10;
export const BAN_DURATIONS = [2, 4, 8];
export const BAN_RESET_AFTER_SECONDS = 10;
/** The banned class hammers one key for this long, then the other: the rested key's level is forgotten meanwhile
 * (rest 25 s > longest ban 8 s + resetAfter 10 s), so each phase climbs the ladder 2 s, 4 s, 8 s again. */
export const BAN_PHASE_SECONDS = 25;

const share = (name) => CLASSES.find((c) => c.name === name).share / 100;

/**
 * Gateway settings derived from the rate, so every class behaves as intended at any --rate:
 * - ban.threshold: the banned class (one key at a time, rate x 15%) reaches it in about a quarter of the strike
 *   window, so it is banned again soon after each ban ends;
 * - the refused class spreads over REFUSED_KEYS keys, each getting at most half the threshold per strike window,
 *   so those keys stay at plain rate_limit_exceeded and are never banned;
 * - anonymous.perMinute: the anonymous class (one source IP) spends its per-IP minute in about 30 s, then gets
 *   429; the bad-key class is spread over enough source IPs that each stays under half of it (always 401).
 *   This needs extra loopback addresses (127.0.0.2...); where they do not work (not Linux), everything comes
 *   from 127.0.0.1 and the anonymous limit is set out of reach, so the anonymous 429 is not exercised.
 */
export function deriveSettings(rate, multiIp) {
  const banned = rate * share('banned');
  const threshold = Math.max(3, Math.round((banned * BAN_WINDOW_SECONDS) / 4));
  const refusedPerKeyPerWindow = ((rate * share('refused')) / REFUSED_KEYS) * BAN_WINDOW_SECONDS;
  if (refusedPerKeyPerWindow * 1.5 > threshold) throw new Error(`internal: refused keys would be banned (threshold ${threshold})`);
  let anonPerMinute;
  let badKeyIps;
  if (multiIp) {
    anonPerMinute = Math.max(6, Math.round((rate * share('anonymous') * 60) / 2));
    badKeyIps = Math.max(1, Math.ceil((rate * share('bad-key') * 60) / (anonPerMinute / 2)));
  } else {
    anonPerMinute = 1_000_000_000;
    badKeyIps = 0;
  }
  return { threshold, anonPerMinute, badKeyIps, refusedPerKeyPerWindow };
}

/** Smooth weighted round-robin (as in nginx): a deterministic interleaving of the classes by share. */
export class ClassPicker {
  constructor(classes) {
    this.items = classes.filter((c) => c.share > 0).map((c) => ({ c, weight: c.share, current: 0 }));
    this.total = this.items.reduce((s, i) => s + i.weight, 0);
  }
  next() {
    let best;
    for (const i of this.items) {
      i.current += i.weight;
      if (!best || i.current > best.current) best = i;
    }
    best.current -= this.total;
    return best.c;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// keys

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function randomBase62(n) {
  const bytes = randomBytes(n * 2);
  let out = '';
  for (let i = 0; out.length < n && i < bytes.length; i++) if (bytes[i] < 248) out += ALPHABET[bytes[i] % 62];
  while (out.length < n) out += ALPHABET[randomBytes(1)[0] % 62];
  return out;
}

function toBase62(n, length) {
  let out = '';
  for (let i = 0; i < length; i++) {
    out = ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out;
}

/**
 * A made-up key in the real shape (tg_ + 43 + 6 base62). Every other one carries a correct CRC32 checksum, so
 * the gateway has to look it up (an unknown hash: a Redis read and a negative-cache entry); the rest have a
 * wrong checksum and are refused without a lookup.
 */
let badKeyCount = 0;
export function makeBadKey() {
  const body = randomBase62(43);
  if (badKeyCount++ % 2 === 0) return `tg_${body}${toBase62(BigInt(zlib.crc32(body)), 6)}`;
  return `tg_${body}${randomBase62(6)}`;
}

// ---------------------------------------------------------------------------------------------------------------
// requests

/**
 * Builds the request generator. Each request is {cls, method, path, headers, body, expect: [outcome...],
 * check(res) -> problem string | undefined, localAddress}. Outcomes are "200", "201" for successes and
 * "<status> <code>" for error bodies, e.g. "429 api_key_banned".
 */
export function makeRequests({ keys, settings, multiIp, startedAt, seedIds, banDurations = BAN_DURATIONS }) {
  const n = { list: 0, get: 0, post: 0, invalid: 0, dep: 0, refused: 0, bad: 0, anon: 0, big: 0 };
  // Ids to GET: the seeded ones plus the latest created (a ring, so memory stays bounded).
  const ids = [...seedIds];
  const ID_RING = 1000;
  let ringAt = 0;
  const rememberId = (id) => {
    if (ids.length < ID_RING) ids.push(id);
    else ids[(ringAt++ % (ID_RING - seedIds.length)) + seedIds.length] = id;
  };
  const bigKey = () => keys.big[n.big++ % keys.big.length];
  const someId = (i) => ids[i % ids.length];
  const maxBan = Math.max(...banDurations);

  const INVALID = [
    { body: '{"name":', expect: '400 invalid_json' },
    { body: '{}', expect: '400 invalid_request' },
    { body: '{"name":"ok","color":"red"}', expect: '400 invalid_request' },
    { body: JSON.stringify({ name: 'x'.repeat(101) }), expect: '400 invalid_request' },
    { body: '{"name":"   "}', expect: '400 invalid_request' },
    { body: '{"name":42}', expect: '400 invalid_request' },
    { body: '[1,2]', expect: '400 invalid_request' },
  ];

  const json = { 'content-type': 'application/json' };
  const auth = (key) => ({ authorization: `Bearer ${key}` });

  const make = {
    list: () => ({ method: 'GET', path: '/v1/categories', headers: auth(bigKey()), expect: ['200'], check: checkList }),
    get: () => {
      const id = someId(n.get++);
      return { method: 'GET', path: `/v1/categories/${id}`, headers: auth(bigKey()), expect: ['200'], check: (r) => checkOne(r, id) };
    },
    'post-valid': () => {
      const i = n.post++;
      const doc = i % 2 === 0 ? { name: `soak ${i}` } : { name: `  soak ${i}  `, description: `created by the soak, #${i}` };
      return {
        method: 'POST',
        path: '/v1/categories',
        headers: { ...auth(bigKey()), ...json },
        body: JSON.stringify(doc),
        expect: ['201'],
        check: (r) => checkCreated(r, doc, rememberId),
      };
    },
    'post-invalid': () => {
      const c = INVALID[n.invalid++ % INVALID.length];
      return { method: 'POST', path: '/v1/categories', headers: { ...auth(bigKey()), ...json }, body: c.body, expect: [c.expect] };
    },
    deprecated: () =>
      n.dep++ % 2 === 0
        ? { method: 'GET', path: '/v1/pets/1', headers: auth(bigKey()), expect: ['410 gone'], check: checkDeprecated }
        : { method: 'GET', path: '/v1/store/orders', headers: auth(bigKey()), expect: ['200'], check: checkDeprecated },
    refused: () => ({
      method: 'GET',
      path: `/v1/categories/${someId(0)}`,
      headers: auth(keys.refused[n.refused++ % keys.refused.length]),
      // The minute window refills every 60 s, so TINY_PER_MINUTE requests per key and minute are admitted.
      expect: ['429 rate_limit_exceeded', '200'],
      check: (r) => checkRetryAfter(r, 60),
    }),
    banned: () => {
      const phase = Math.floor((Date.now() - startedAt) / (BAN_PHASE_SECONDS * 1000));
      const key = keys.banned[phase % keys.banned.length];
      return {
        method: 'GET',
        path: `/v1/categories/${someId(0)}`,
        headers: auth(key),
        banKey: key,
        expect: ['429 api_key_banned', '429 rate_limit_exceeded', '200'],
        check: (r) => checkRetryAfter(r, r.code === 'api_key_banned' ? maxBan : 60),
      };
    },
    'bad-key': () => {
      const i = n.bad++;
      const headers = auth(makeBadKey());
      return {
        method: i % 3 === 0 ? 'POST' : 'GET',
        path: '/v1/categories',
        headers: i % 3 === 0 ? { ...headers, ...json } : headers,
        body: i % 3 === 0 ? '{"name":"never created"}' : undefined,
        localAddress: multiIp ? `127.0.0.${3 + (i % settings.badKeyIps)}` : undefined,
        expect: multiIp ? ['401 invalid_api_key'] : ['401 invalid_api_key', '429 rate_limit_exceeded'],
        check: checkUnauthorized,
      };
    },
    anonymous: () => {
      const i = n.anon++;
      return {
        method: 'GET',
        path: '/v1/categories',
        headers: i % 2 === 0 ? {} : { authorization: 'Basic c29hazpzb2Fr' },
        localAddress: multiIp ? '127.0.0.2' : undefined,
        expect: ['401 missing_api_key', '429 rate_limit_exceeded'],
        check: checkUnauthorized,
      };
    },
  };
  return (cls) => ({ cls: cls.name, ...make[cls.name]() });
}

// Class-specific checks: return a problem description, or undefined.

function checkList(r) {
  if (!Array.isArray(r.json)) return 'list: body is not a JSON array';
  return undefined;
}

function checkOne(r, id) {
  if (r.json?.id !== id) return `get: body id ${JSON.stringify(r.json?.id)}, expected ${id}`;
  return undefined;
}

function checkCreated(r, doc, rememberId) {
  if (r.status !== 201) return undefined;
  const id = r.json?.id;
  if (!Number.isSafeInteger(id) || id < 1) return `post: no integer id in ${r.text.slice(0, 100)}`;
  if (r.headers.location !== `/v1/categories/${id}`) return `post: Location ${JSON.stringify(r.headers.location)} for id ${id}`;
  if (r.json.name !== doc.name.trim()) return `post: name ${JSON.stringify(r.json.name)} for ${JSON.stringify(doc.name)}`;
  rememberId(id);
  return undefined;
}

function checkDeprecated(r) {
  if (!/^@\d+$/.test(r.headers.deprecation ?? '')) return `deprecated route: Deprecation ${JSON.stringify(r.headers.deprecation)}`;
  if (!r.headers.sunset || Number.isNaN(Date.parse(r.headers.sunset))) return `deprecated route: Sunset ${JSON.stringify(r.headers.sunset)}`;
  if (!/rel="deprecation"/.test(r.headers.link ?? '')) return `deprecated route: Link ${JSON.stringify(r.headers.link)}`;
  return undefined;
}

function checkRetryAfter(r, max) {
  if (r.status !== 429) return undefined;
  const ra = r.headers['retry-after'];
  if (!/^\d+$/.test(ra ?? '') || Number(ra) < 1 || Number(ra) > max) return `429: Retry-After ${JSON.stringify(ra)}, expected 1..${max}`;
  return undefined;
}

function checkUnauthorized(r) {
  if (r.status === 429) return checkRetryAfter(r, 60);
  const www = r.headers['www-authenticate'] ?? '';
  if (!www.startsWith('Bearer realm="tollgate"')) return `401: WWW-Authenticate ${JSON.stringify(www)}`;
  if ((r.code === 'invalid_api_key') !== www.includes('error="invalid_token"')) return `401 ${r.code}: WWW-Authenticate ${JSON.stringify(www)}`;
  return undefined;
}

/** Checks every answer gets, whatever its class. */
function checkCommon(r, sentRequestId) {
  const h = r.headers;
  if (h['x-request-id'] !== sentRequestId) return `X-Request-Id ${JSON.stringify(h['x-request-id'])}, sent ${sentRequestId}`;
  if (h['x-powered-by'] !== undefined) return 'X-Powered-By present';
  if (h['x-content-type-options'] !== 'nosniff') return `X-Content-Type-Options ${JSON.stringify(h['x-content-type-options'])}`;
  // Contract §4: every /v1 answer (keyed, 401 and anonymous 429 alike) carries the rate-limit headers.
  if (!/^\d+$/.test(h['x-ratelimit-limit'] ?? '')) return `X-RateLimit-Limit ${JSON.stringify(h['x-ratelimit-limit'])}`;
  if (!h['ratelimit-policy']) return 'RateLimit-Policy missing';
  if (r.status >= 400) {
    if (!/^application\/json\b/.test(h['content-type'] ?? '')) return `error with Content-Type ${JSON.stringify(h['content-type'])}`;
    const b = r.json;
    if (!b || typeof b !== 'object' || typeof b.code !== 'string' || typeof b.message !== 'string' || b.status !== r.status) {
      return `error body is not {code, message, status=${r.status}}: ${r.text.slice(0, 120)}`;
    }
    if (/\n\s+at |\((?:file:\/\/)?\/[^)]*:\d+:\d+\)|tg_[0-9A-Za-z]{49}|127\.0\.0\.1:\d+/.test(b.message))
      return `error message leaks internals: ${b.message.slice(0, 120)}`;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP

/** Latency histogram: 0.1 ms buckets up to 2 s, one overflow bucket, exact max. Fixed memory. */
export class Histogram {
  constructor() {
    this.buckets = new Uint32Array(20_002);
    this.count = 0;
    this.max = 0;
  }
  add(ms) {
    this.count++;
    if (ms > this.max) this.max = ms;
    this.buckets[Math.min(20_001, Math.max(0, Math.ceil(ms * 10)))]++;
  }
  percentile(p) {
    if (this.count === 0) return NaN;
    const target = Math.ceil(this.count * p);
    let seen = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      seen += this.buckets[i];
      if (seen >= target) return i === 20_001 ? this.max : i / 10;
    }
    return this.max;
  }
}

/** Everything the summary reports; bounded memory whatever the duration. */
export class Stats {
  constructor() {
    this.byClass = new Map(); // class -> Map(outcome -> count)
    this.done = 0;
    this.errors5xx = 0;
    this.unexpected = 0; // answers outside the class's expected set, or failing a check, or no answer at all
    this.networkErrors = 0;
    this.staleSocketRetries = 0;
    this.samples = []; // first problems, for the report
    this.problemKinds = new Map(); // problem text (numbers stripped) -> count
    this.latency = new Histogram();
    this.latencyByClass = new Map();
    this.bans = { transitions: 0, byKey: new Map() }; // banned class: times a key went from not banned to banned
  }
  count(cls, outcome) {
    let m = this.byClass.get(cls);
    if (!m) this.byClass.set(cls, (m = new Map()));
    m.set(outcome, (m.get(outcome) ?? 0) + 1);
  }
  problem(req, text, detail) {
    this.unexpected++;
    const kind = `${req.cls}: ${text.replace(/\d+/g, 'N').slice(0, 160)}`;
    this.problemKinds.set(kind, (this.problemKinds.get(kind) ?? 0) + 1);
    if (this.samples.length < 20)
      this.samples.push({ at: new Date().toISOString(), cls: req.cls, request: `${req.method} ${req.path}`, problem: text, ...detail });
  }
}

/** One keep-alive agent per source address, so pools (and the server's view of client IPs) stay apart. */
export function makeAgents(concurrency) {
  const agents = new Map();
  return {
    get(localAddress = '127.0.0.1') {
      let a = agents.get(localAddress);
      // timeout: idle pooled sockets are closed after 4 s, before the gateway's 5 s keep-alive timeout closes
      // them, so the client never picks a socket the server is closing (the classic keep-alive reuse race).
      if (!a) agents.set(localAddress, (a = new Agent({ keepAlive: true, maxSockets: concurrency, localAddress, timeout: 4_000 })));
      return a;
    },
    destroy() {
      for (const a of agents.values()) a.destroy();
    },
  };
}

const MAX_BODY = 8 * 1024 * 1024;

/** Sends one request; resolves {status, headers, text, json, code} or {error}. Never rejects. */
export function send(base, agents, req, requestId, timeoutMs = 15_000) {
  return new Promise((resolve) => {
    const headers = { ...req.headers, 'x-request-id': requestId };
    if (req.body !== undefined) headers['content-length'] = Buffer.byteLength(req.body);
    let settled = false;
    const done = (v) => {
      if (!settled) {
        settled = true;
        resolve(v);
      }
    };
    const r = request(
      {
        host: base.hostname,
        port: base.port,
        method: req.method,
        path: req.path,
        headers,
        agent: agents.get(req.localAddress),
        localAddress: req.localAddress,
      },
      (res) => {
        const chunks = [];
        let size = 0;
        res.on('data', (c) => {
          size += c.length;
          if (size <= MAX_BODY) chunks.push(c);
        });
        res.on('error', (err) => done({ error: `response: ${err.code ?? err.message}` }));
        res.on('aborted', () => done({ error: 'response aborted' }));
        res.on('end', () => {
          if (size > MAX_BODY) return done({ error: `response body over ${MAX_BODY} bytes` });
          const text = Buffer.concat(chunks).toString('utf8');
          let json;
          if (/^application\/json\b/.test(res.headers['content-type'] ?? '')) {
            try {
              json = JSON.parse(text);
            } catch {}
          }
          const code = res.statusCode >= 400 && typeof json?.code === 'string' ? json.code : undefined;
          done({ status: res.statusCode, headers: res.headers, text, json, code });
        });
      },
    );
    r.setTimeout(timeoutMs, () => r.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    r.on('error', (err) =>
      done({
        error: `request: ${err.code ?? err.message}${r.reusedSocket ? ' (on a reused keep-alive socket)' : ''}`,
        staleSocket: r.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE'),
      }),
    );
    r.end(req.body);
  });
}

/** Sends req and books the answer in stats: expected outcome, common and class checks, 5xx, latency. */
export async function sendAndCheck(base, agents, req, stats, requestId, banState) {
  const t0 = performance.now();
  let r = await send(base, agents, req, requestId);
  if (r.staleSocket) {
    // A kept-alive socket that the server closed just as it was reused: the request never reached the gateway
    // (Node's documented advice is to retry). Retried once on a fresh socket and counted; a second failure counts.
    stats.staleSocketRetries++;
    r = await send(base, agents, req, requestId);
  }
  const ms = performance.now() - t0;
  stats.done++;
  stats.latency.add(ms);
  let h = stats.latencyByClass.get(req.cls);
  if (!h) stats.latencyByClass.set(req.cls, (h = new Histogram()));
  h.add(ms);
  if (r.error) {
    stats.networkErrors++;
    stats.count(req.cls, 'network error');
    stats.problem(req, r.error);
    return;
  }
  const outcome = r.status >= 400 ? `${r.status} ${r.code ?? '(no JSON error code)'}` : String(r.status);
  stats.count(req.cls, outcome);
  if (r.status >= 500) stats.errors5xx++;
  if (req.banKey) {
    const banned = r.code === 'api_key_banned';
    const was = banState.get(req.banKey) ?? false;
    if (banned && !was) stats.bans.transitions++;
    banState.set(req.banKey, banned);
  }
  const detail = { status: r.status, body: r.text.slice(0, 200) };
  if (!req.expect.includes(outcome)) return stats.problem(req, `got ${outcome}, expected ${req.expect.join(' | ')}`, detail);
  const problem = checkCommon(r, requestId) ?? req.check?.(r);
  if (problem) stats.problem(req, problem, detail);
}

/**
 * Paces requests at `rate` per second with at most `concurrency` in flight, for durationMs (bounded both ways).
 * When the gateway cannot keep up, requests that would be more than a second late are skipped and counted,
 * rather than piling up. Resolves when the time is up and the last request has answered (or after drainMs).
 */
export function runLoad({ rate, concurrency, durationMs, next, fire, shouldStop, drainMs = 20_000 }) {
  return new Promise((resolve) => {
    const start = performance.now();
    let issued = 0;
    let skipped = 0;
    let inflight = 0;
    let saturated = 0;
    let stopped = false;
    const finish = (why) => {
      const endedAt = performance.now();
      const deadline = Date.now() + drainMs;
      const wait = () => {
        if (inflight === 0 || Date.now() > deadline) return resolve({ issued, skipped, saturated, elapsedMs: endedAt - start, why, leftInFlight: inflight });
        setTimeout(wait, 20);
      };
      wait();
    };
    const timer = setInterval(() => {
      if (stopped) return;
      const elapsed = performance.now() - start;
      const stop = shouldStop();
      if (elapsed >= durationMs || stop) {
        stopped = true;
        clearInterval(timer);
        return finish(stop || 'time');
      }
      const due = Math.floor((elapsed * rate) / 1000);
      if (due - issued > rate) {
        skipped += due - issued - rate;
        issued = due - rate;
      }
      if (issued < due && inflight >= concurrency) saturated++;
      while (issued < due && inflight < concurrency) {
        issued++;
        inflight++;
        fire(next(), issued).finally(() => inflight--);
      }
    }, 5);
  });
}
