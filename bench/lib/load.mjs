// Load generators: autocannon (in-process, programmatic) or wrk (when installed). Both return the same shape:
// { loader, requests, durationS, rps, latencyMs: { p50, p99, mean, max }, statuses: { "200": n, ... }, errors, timeouts }.
// Every run is bounded by its duration (plus a hard guard).
import { spawn, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function wrkAvailable() {
  try {
    execFileSync('sh', ['-c', 'command -v wrk'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

let spawnHook = (child) => child;
/** Lets the bench register the wrk processes it starts (so they are stopped with everything else). */
export function onSpawn(fn) {
  spawnHook = fn;
}

let autocannonModule;
async function loadAutocannon() {
  if (!autocannonModule) {
    try {
      autocannonModule = (await import('autocannon')).default;
    } catch {
      throw new Error('autocannon is not installed: run `npm install` (it is a devDependency), `npm install --no-save autocannon@8`, or install wrk');
    }
  }
  return autocannonModule;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * One load run. `keys` is the list of API keys: one key is a fixed Authorization header, more are rotated
 * round-robin over all connections, one per request. `method` and `body` (a JSON text, sent as application/json):
 * GET without a body unless given (scenario v's POSTs).
 */
export async function runLoad({ loader, url, connections, durationS, keys, tmpDir, wrkThreads = 1, method = 'GET', body }) {
  return loader === 'wrk'
    ? runWrk({ url, connections, durationS, keys, tmpDir, threads: wrkThreads, method, body })
    : runAutocannon({ url, connections, durationS, keys, method, body });
}

async function runAutocannon({ url, connections, durationS, keys, method, body }) {
  const autocannon = await loadAutocannon();
  const opts = {
    url,
    connections,
    duration: durationS,
    pipelining: 1,
    timeout: 10,
    method,
    ...(body !== undefined ? { body, headers: { 'content-type': 'application/json' } } : {}),
    // Bench-internal: no progress bar, nothing printed.
  };
  if (keys.length === 1) {
    opts.headers = { ...opts.headers, authorization: `Bearer ${keys[0]}` };
  } else if (keys.length > 1) {
    let next = 0;
    const n = keys.length;
    opts.requests = [
      {
        method,
        ...(body !== undefined ? { body } : {}),
        setupRequest: (req) => {
          req.headers.authorization = `Bearer ${keys[next]}`;
          next = next + 1 === n ? 0 : next + 1;
          return req;
        },
      },
    ];
  }
  // Latencies of every response (autocannon's own histogram keeps 2xx only, in whole milliseconds):
  // kept here in microseconds so a 1 ms budget can be checked.
  let lat = new Float64Array(1 << 16);
  let count = 0;
  const instance = autocannon(opts);
  instance.on('response', (_client, _status, _bytes, responseTimeMs) => {
    if (count === lat.length) {
      const bigger = new Float64Array(lat.length * 2);
      bigger.set(lat);
      lat = bigger;
    }
    lat[count++] = responseTimeMs;
  });
  const guard = setTimeout(() => instance.stop(), (durationS + 30) * 1000);
  const result = await instance;
  clearTimeout(guard);
  const sorted = lat.subarray(0, count).sort();
  let sum = 0;
  for (let i = 0; i < count; i++) sum += sorted[i];
  const statuses = {};
  for (const [code, { count: c }] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = c;
  const durationSActual = result.duration || durationS;
  return {
    loader: 'autocannon',
    requests: count,
    durationS: durationSActual,
    rps: count / durationSActual,
    latencyMs: { p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean: count ? sum / count : NaN, max: count ? sorted[count - 1] : NaN },
    statuses,
    errors: result.errors ?? 0,
    timeouts: result.timeouts ?? 0,
  };
}

const WRK_SCRIPT = `
local method = os.getenv("BENCH_METHOD")
if method and method ~= "" then wrk.method = method end
local body = os.getenv("BENCH_BODY")
if body and body ~= "" then
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
end
local keys = {}
local keysFile = os.getenv("BENCH_KEYS_FILE")
if keysFile and keysFile ~= "" then
  for line in io.lines(keysFile) do keys[#keys + 1] = line end
end
local n = #keys
local i = 0
if n == 1 then
  wrk.headers["Authorization"] = "Bearer " .. keys[1]
elseif n > 1 then
  request = function()
    i = i % n + 1
    local h = { ["Authorization"] = "Bearer " .. keys[i] }
    if body and body ~= "" then h["Content-Type"] = "application/json" end
    return wrk.format(nil, nil, h)
  end
end
done = function(summary, latency, requests)
  io.write(string.format('BENCH_JSON {"requests":%d,"durationUs":%d,"p50":%d,"p99":%d,"mean":%f,"max":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.mean, latency.max,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout))
end
`;

async function runWrk({ url, connections, durationS, keys, tmpDir, threads, method, body }) {
  const script = join(tmpDir, 'wrk-bench.lua');
  writeFileSync(script, WRK_SCRIPT);
  const keysFile = join(tmpDir, `wrk-keys-${keys.length}.txt`);
  writeFileSync(keysFile, `${keys.join('\n')}\n`);
  const t = Math.max(1, Math.min(threads, connections));
  // wrk takes whole seconds only.
  const args = [`-t${t}`, `-c${connections}`, `-d${Math.max(1, Math.round(durationS))}s`, '--timeout', '10s', '-s', script, url];
  const out = await new Promise((resolve, reject) => {
    const child = spawnHook(
      spawn('wrk', args, {
        env: { ...process.env, BENCH_KEYS_FILE: keys.length ? keysFile : '', BENCH_METHOD: method, BENCH_BODY: body ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const guard = setTimeout(() => child.kill('SIGKILL'), (durationS + 30) * 1000);
    child.once('exit', (code) => {
      clearTimeout(guard);
      if (code === 0) resolve(stdout);
      else reject(new Error(`wrk exited with ${code}: ${(stderr || stdout).trim().slice(0, 2000)}`));
    });
  });
  const line = out.split('\n').find((l) => l.startsWith('BENCH_JSON '));
  if (!line) throw new Error(`wrk printed no summary:\n${out}`);
  const s = JSON.parse(line.slice('BENCH_JSON '.length));
  const durationSActual = s.durationUs / 1e6;
  // wrk counts responses with status > 399 only as a total ("status" errors); the gateway's own metrics give the
  // breakdown where it is available (see run.mjs).
  const statuses = { '2xx/3xx': s.requests - s.status };
  if (s.status) statuses['4xx/5xx'] = s.status;
  return {
    loader: 'wrk',
    requests: s.requests,
    durationS: durationSActual,
    rps: s.requests / durationSActual,
    latencyMs: { p50: s.p50 / 1000, p99: s.p99 / 1000, mean: s.mean / 1000, max: s.max / 1000 },
    statuses,
    errors: s.connect + s.read + s.write,
    timeouts: s.timeout,
  };
}
