// One test file's Redis, upstream and gateway: started in beforeAll, stopped in afterAll in reverse order (gateway,
// client, upstream, Redis), so a test file says what it needs instead of repeating the start and stop code.
import { afterAll, beforeAll } from 'vitest';
import type { Redis } from 'ioredis';
import { TestRedis } from './redis-server.js';
import { TestUpstream, type Behaviour } from './upstream.js';

/** What a gateway factory may return: anything with one of the stop methods the test helpers' gateways have. */
type Stoppable =
  | { close(): Promise<unknown> } // startTestGateway, startLimitsGateway
  | { shutdown(): Promise<unknown> } // startGateway (src/server/gateway-server.ts): the gateway with its admin listener
  | { proc: { stop(): Promise<unknown> } } // startServe (helpers/cli.ts): the built CLI as a child
  | { stop(): Promise<unknown> }; // CliProcess

export interface StackOptions<G> {
  /** A private redis-server (true), with these extra redis-server arguments (an array), or none (false, the default). */
  redis?: boolean | readonly string[];
  /** Also a client on that Redis for assertions (`stack.client`), disconnected in afterAll. */
  client?: boolean;
  /** A TestUpstream (true: echo), with this behaviour, or none (false). Default true. */
  upstream?: boolean | Behaviour;
  /** Built once Redis and the upstream are up; stopped first. May return several: an array, or a record by name. */
  gateway?: (stack: Stack<never>) => Promise<G>;
}

export interface Stack<G> {
  readonly redis: TestRedis;
  readonly client: Redis;
  readonly up: TestUpstream;
  readonly gw: G;
}

/** Starts what `opts` asks for in beforeAll and stops it in afterAll; the fields throw if read before beforeAll ran. */
export function useStack<G extends Stoppable | readonly Stoppable[] | Readonly<Record<string, Stoppable>> = never>(opts: StackOptions<G> = {}): Stack<G> {
  const started: { redis?: TestRedis; client?: Redis; up?: TestUpstream; gw?: G } = {};
  const get = <K extends keyof typeof started>(name: K): NonNullable<(typeof started)[K]> => {
    const value = started[name];
    if (value === undefined) throw new Error(`useStack: no ${name} (not asked for, or read before beforeAll ran)`);
    return value as NonNullable<(typeof started)[K]>;
  };
  const stack = {
    get redis() {
      return get('redis');
    },
    get client() {
      return get('client');
    },
    get up() {
      return get('up');
    },
    get gw() {
      return get('gw');
    },
  } as Stack<G>;

  beforeAll(async () => {
    const upstream = opts.upstream ?? true;
    const extraArgs = Array.isArray(opts.redis) ? opts.redis : [];
    // Each recorded as soon as it is up, so that afterAll stops it even if the other failed to start.
    const starts = await Promise.allSettled([
      opts.redis ? TestRedis.start(extraArgs).then((r) => (started.redis = r)) : undefined,
      upstream ? TestUpstream.start().then((u) => (started.up = u)) : undefined,
    ]);
    const failedStart = starts.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failedStart) throw failedStart.reason;
    const up = started.up;
    if (up && typeof upstream === 'function') up.behaviour = upstream;
    if (opts.client) started.client = get('redis').client();
    if (opts.gateway) started.gw = await opts.gateway(stack as unknown as Stack<never>);
  });

  // Each part is stopped even if stopping another failed (or the gateway never started); the first failure is thrown.
  afterAll(async () => {
    const results = [
      ...(await Promise.allSettled(gatewaysIn(started.gw).map(stopOne))),
      ...(await Promise.allSettled([(async () => started.client?.disconnect())(), started.up?.close()])),
      ...(await Promise.allSettled([started.redis?.stop()])),
    ];
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  });

  return stack;
}

function isStoppable(g: object): g is Stoppable {
  return 'close' in g || 'shutdown' in g || 'proc' in g || 'stop' in g;
}

function gatewaysIn(gw: unknown): Stoppable[] {
  if (gw === undefined || gw === null) return [];
  if (Array.isArray(gw)) return gw as Stoppable[];
  if (isStoppable(gw as object)) return [gw as Stoppable];
  return Object.values(gw as Record<string, Stoppable>).filter((g) => g !== undefined);
}

async function stopOne(g: Stoppable): Promise<void> {
  if ('close' in g) await g.close();
  else if ('shutdown' in g) await g.shutdown();
  else if ('proc' in g) await g.proc.stop();
  else await g.stop();
}
