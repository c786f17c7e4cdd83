// A bounded load driver for reliability tests: a fixed number of concurrent request loops over keep-alive
// connections, paced to a total rate, stopped by a request count, a duration, or stop(), whichever comes first.
// Every request is recorded (status, error code from the JSON body, client-side error, time taken, whether it went
// over a reused connection, and the `phase` it started in), so a test can judge each one against the contract.
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export interface LoadResult {
  url: string;
  /** Date.now() when the request was sent. */
  startedAt: number;
  /** Wall time until the response ended or the request failed. */
  ms: number;
  /** The test's `phase` label when the request started. */
  phase: string;
  /** HTTP status, when response headers arrived. */
  status?: number;
  headers?: IncomingHttpHeaders;
  body?: string;
  /** `code` of a JSON error body. */
  code?: string;
  /** Client-side failure: a Node error code (ECONNREFUSED, ECONNRESET, ...), 'cut' (the response body was cut off), or 'client_timeout'. */
  error?: string;
  /** The request went out on a keep-alive connection that had carried an earlier request. */
  reused: boolean;
}

export interface LoadOptions {
  /** Base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  /** Request path (a function: chosen per request). */
  path?: string | ((n: number) => string);
  method?: string;
  /** Request headers (a function: chosen per request, e.g. to alternate keys). */
  headers?: Record<string, string> | ((n: number) => Record<string, string>);
  concurrency?: number;
  /** Hard bounds: the driver stops at whichever comes first. */
  durationMs: number;
  maxRequests: number;
  /** Total request rate the loops are paced to (each loop waits so that concurrency loops together stay under it). */
  ratePerSecond?: number;
  /** Replaces the pacing: each loop sleeps this long (ms) after every request. */
  pauseMs?: () => number;
  /** A request with no complete answer in this time is destroyed and recorded as 'client_timeout'. */
  requestTimeoutMs?: number;
  /** Default: a keep-alive agent of the driver's own, destroyed when the load ends. */
  agent?: Agent;
}

export interface Load {
  readonly results: LoadResult[];
  /** Label attached to requests started from now on. */
  phase: string;
  /** Resolves when every loop has finished (bounds reached or stop()). */
  readonly done: Promise<LoadResult[]>;
  /** Asks the loops to stop after their current request, and waits for them. */
  stop(): Promise<LoadResult[]>;
}

/** One GET (or `method`) request, always resolved, never rejected. */
export function timedRequest(
  url: string,
  opts: {
    method?: string;
    headers?: Record<string, string | string[]>;
    body?: string | Buffer;
    agent?: Agent | false;
    timeoutMs?: number;
    phase?: string;
  } = {},
): Promise<LoadResult> {
  return new Promise((resolve) => {
    const startedAt = Date.now();
    let settled = false;
    let status: number | undefined;
    let headers: IncomingHttpHeaders | undefined;
    // The path goes out exactly as given (a URL object would resolve "..", "%2e%2e" and the like first).
    const m = /^(https?:\/\/[^/?#]+)(.*)$/.exec(url);
    const req = httpRequest(m?.[1] ?? url, { path: m?.[2] || '/', method: opts.method ?? 'GET', headers: opts.headers ?? {}, agent: opts.agent ?? false });
    const finish = (extra: Partial<LoadResult>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({
        url,
        startedAt,
        ms: Date.now() - startedAt,
        phase: opts.phase ?? '',
        reused: req.reusedSocket,
        ...(status !== undefined ? { status, headers } : {}),
        ...extra,
      });
    };
    const timer = setTimeout(() => {
      finish({ error: 'client_timeout' });
      req.destroy();
    }, opts.timeoutMs ?? 10_000);
    req.on('response', (res) => {
      status = res.statusCode;
      headers = res.headers;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', () => {});
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        let code: string | undefined;
        if (status !== undefined && status >= 400) {
          try {
            code = (JSON.parse(body) as { code?: string }).code;
          } catch {
            /* not JSON: the checks say so */
          }
        }
        finish({ body, ...(code !== undefined ? { code } : {}) });
      });
      res.on('close', () => {
        if (!res.complete) finish({ error: 'cut', body: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => finish({ error: err.code ?? err.message }));
    req.end(opts.body);
  });
}

export function startLoad(opts: LoadOptions): Load {
  const concurrency = opts.concurrency ?? 20;
  const ownAgent = !opts.agent;
  const agent = opts.agent ?? new Agent({ keepAlive: true, maxSockets: concurrency });
  const started = Date.now();
  const minIntervalMs = opts.ratePerSecond ? (concurrency * 1000) / opts.ratePerSecond : 0;
  const results: LoadResult[] = [];
  let sent = 0;
  let stopping = false;
  const load = {
    results,
    phase: 'start',
    done: undefined as unknown as Promise<LoadResult[]>,
    async stop() {
      stopping = true;
      return load.done;
    },
  };
  const loop = async () => {
    while (!stopping && sent < opts.maxRequests && Date.now() - started < opts.durationMs) {
      const n = sent++;
      const path = typeof opts.path === 'function' ? opts.path(n) : (opts.path ?? '/v1/load');
      const headers = typeof opts.headers === 'function' ? opts.headers(n) : (opts.headers ?? {});
      const r = await timedRequest(opts.url + path, { method: opts.method, headers, agent, timeoutMs: opts.requestTimeoutMs, phase: load.phase });
      results.push(r);
      const wait = opts.pauseMs ? opts.pauseMs() : minIntervalMs - r.ms;
      if (wait > 0) await sleep(wait);
    }
  };
  load.done = Promise.all(Array.from({ length: concurrency }, loop)).then(() => {
    if (ownAgent) agent.destroy();
    return results;
  });
  return load;
}

/** What a status must carry as its error code (README, "Error codes"). */
const CODES: Record<number, string[]> = {
  400: ['invalid_request', 'invalid_json'],
  401: ['missing_api_key', 'invalid_api_key'],
  404: ['not_found'],
  410: ['gone'],
  413: ['payload_too_large'],
  429: ['rate_limit_exceeded', 'api_key_banned'],
  500: ['internal_error'],
  502: ['bad_gateway'],
  503: ['service_unavailable'],
  504: ['gateway_timeout'],
};

export interface ContractRules {
  /** Statuses allowed at all. */
  statuses: number[];
  /** No request may take longer than this (ms). */
  boundMs: number;
  /** Client-side failures allowed (e.g. 'cut' when the upstream resets mid-body). Default: none. */
  errors?: string[];
}

/**
 * Every way the results break the rules, one line each (an empty list passes): a status outside the set, an error
 * answer that is not the JSON error body with the matching code and status, a client-side failure not allowed,
 * a request slower than the bound.
 */
export function contractViolations(results: LoadResult[], rules: ContractRules): string[] {
  const out: string[] = [];
  const add = (r: LoadResult, what: string) => {
    if (out.length < 20) out.push(`[${r.phase} +${r.ms}ms ${r.status ?? r.error}] ${what}`);
  };
  for (const r of results) {
    if (r.ms > rules.boundMs) add(r, `took ${r.ms} ms > ${rules.boundMs} ms`);
    if (r.error !== undefined) {
      if (!(rules.errors ?? []).includes(r.error)) add(r, `client saw ${r.error}`);
      continue;
    }
    const status = r.status!;
    if (!rules.statuses.includes(status)) add(r, `status ${status} not in ${rules.statuses.join('/')}: ${r.body?.slice(0, 200)}`);
    if (status >= 400) {
      const type = String(r.headers?.['content-type'] ?? '');
      if (!type.startsWith('application/json')) add(r, `error answer with content-type "${type}"`);
      let body: { code?: unknown; message?: unknown; status?: unknown } = {};
      try {
        body = JSON.parse(r.body ?? '') as typeof body;
      } catch {
        add(r, `error body is not JSON: ${r.body?.slice(0, 200)}`);
      }
      if (body.status !== status || typeof body.message !== 'string' || !(CODES[status] ?? []).includes(String(body.code))) {
        add(r, `error body does not match the contract: ${r.body?.slice(0, 200)}`);
      }
    }
  }
  if (out.length === 20) out.push('(more left out)');
  return out;
}

/** "200×512 502×31 ECONNRESET×1": a compact summary for assertion messages. */
export function tally(results: LoadResult[]): string {
  const counts = new Map<string, number>();
  for (const r of results) {
    const k = r.error ?? String(r.status);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => `${k}×${n}`).join(' ');
}

/** Requests of `results` that got `status` (and no client-side error). */
export function withStatus(results: LoadResult[], status: number): LoadResult[] {
  return results.filter((r) => r.error === undefined && r.status === status);
}
