// Reports kept for their pages, so that the pages of one report all come from the same figures whichever gateway
// instance answers each: in Redis for the fleet (one list per report: its head, then its rows, expiring a bounded
// time after its last page was read), in memory for a Redis-less gateway (one instance).
import { LRUCache } from 'lru-cache';
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';

/** A report that cannot be answered as asked: its kept copy expired, it is too large to keep, or to compute. */
export type ReportErrorCode = 'report_expired' | 'report_too_large' | 'report_out_of_memory';

export class ReportError extends Error {
  constructor(
    readonly code: ReportErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface KeptReports {
  /** Keeps `rows` (in order) and `head` (what they answer) under `id` for `ttlMs`. */
  save(id: string, head: unknown, rows: readonly unknown[], ttlMs: number): Promise<void>;
  /** Rows [offset, offset + count) of the kept report, its head and row count; keeps it ttlMs longer. undefined: gone. */
  read<H, R>(id: string, offset: number, count: number, ttlMs: number): Promise<{ head: H; rows: R[]; total: number } | undefined>;
}

/** Rows written to Redis per call: each call a few hundred kilobytes, so no one command holds Redis for long. */
const SAVE_BATCH = 500;

/** KEYS: 1 the list being built. ARGV: 1 its time to live (ms), then values to append. */
const APPEND = `
redis.call('RPUSH', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
`;
/** KEYS: 1 the list built, 2 its name once complete. ARGV: 1 time to live (ms). Readers never see half a report. */
const PUBLISH = `
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
`;
/** KEYS: 1 the kept report. ARGV: 1 first row (0-based), 2 rows, 3 time to live (ms). Returns head, row count, rows. */
const READ = `
local n = redis.call('LLEN', KEYS[1])
if n == 0 then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local first = tonumber(ARGV[1]) + 1
local rows = {}
if tonumber(ARGV[2]) > 0 then rows = redis.call('LRANGE', KEYS[1], first, first + tonumber(ARGV[2]) - 1) end
return { redis.call('LINDEX', KEYS[1], 0), n - 1, rows }
`;

export class RedisKeptReports implements KeptReports {
  constructor(
    private readonly redis: Pick<RedisCommands, 'eval'>,
    private readonly ks: Keyspace,
  ) {}

  async save(id: string, head: unknown, rows: readonly unknown[], ttlMs: number): Promise<void> {
    const key = this.ks.keptReport(id);
    const building = `${key}:building`;
    const values = [JSON.stringify(head), ...rows.map((r) => JSON.stringify(r))];
    for (let i = 0; i < values.length; i += SAVE_BATCH) await this.redis.eval(APPEND, 1, building, String(ttlMs), ...values.slice(i, i + SAVE_BATCH));
    await this.redis.eval(PUBLISH, 2, building, key, String(ttlMs));
  }

  async read<H, R>(id: string, offset: number, count: number, ttlMs: number): Promise<{ head: H; rows: R[]; total: number } | undefined> {
    const got = (await this.redis.eval(READ, 1, this.ks.keptReport(id), String(offset), String(count), String(ttlMs))) as [string, number, string[]] | null;
    if (!got) return undefined;
    return { head: JSON.parse(got[0]) as H, total: Number(got[1]), rows: got[2].map((r) => JSON.parse(r) as R) };
  }
}

/** A Redis-less gateway's kept reports, bounded in rows (an entry larger than the bound is not kept). */
export class MemoryKeptReports implements KeptReports {
  private readonly kept = new LRUCache<string, { head: unknown; rows: readonly unknown[] }>({
    maxSize: 400_000,
    sizeCalculation: (k) => Math.max(1, k.rows.length),
    ttlAutopurge: false,
    ttl: 1,
    updateAgeOnGet: true,
  });

  async save(id: string, head: unknown, rows: readonly unknown[], ttlMs: number): Promise<void> {
    // A deep copy, as Redis keeps one: a row changed later by its maker does not change the kept report.
    this.kept.set(id, structuredClone({ head, rows }), { ttl: ttlMs });
  }

  async read<H, R>(id: string, offset: number, count: number, ttlMs: number): Promise<{ head: H; rows: R[]; total: number } | undefined> {
    const k = this.kept.get(id);
    if (!k) return undefined;
    this.kept.set(id, k, { ttl: ttlMs });
    return { head: structuredClone(k.head) as H, rows: structuredClone(k.rows.slice(offset, offset + count)) as R[], total: k.rows.length };
  }
}
